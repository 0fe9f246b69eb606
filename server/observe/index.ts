export { withIdleResources } from './idle.js'
export { CoordinatorMetrics } from './metrics.js'
export { Observer } from './observer.js'
export { ResourceView } from './view.js'
export type {
  FamilyFigures,
  FamilyUsageFigures,
  KeyFigures,
  QuotaFigures,
  ResourceFigures,
} from './view.js'
