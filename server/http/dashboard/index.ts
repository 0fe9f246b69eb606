export { dashboardCsp, registerDashboard } from './routes.js'
