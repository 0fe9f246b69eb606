export { Gateway } from './gateway.js'
export { MessageBudget } from './message-budget.js'
export { WsSession } from './ws-session.js'
