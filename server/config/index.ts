export { PatternList, globToRegExp, isGlob } from './glob.js'
export {
  loadConfigFile,
  parseConfig,
  parseConfigText,
  readYamlFile,
  resolveConfig,
} from './load.js'
export {
  CompiledConfig,
  copySettings,
  isFamilyKey,
  isFamilyShare,
  keyShape,
  leaseTtlMsAt,
  templateLearningMs,
} from './resolve.js'
export type { FamilySettings, ResourceSettings } from './resolve.js'
export { configSchema, holdingsKeySchema, resourceTemplateSchema } from './schema.js'
export type {
  Config,
  ConfigInput,
  HaConfig,
  HoldingsKeyConfig,
  Limits,
  ParentConfig,
  ResourceTemplate,
  TenantConfig,
  TlsConfig,
} from './schema.js'
export { ConfigFileWatcher } from './watch.js'
export { configWarnings, type ConfigWarning } from './warnings.js'
export { securityDowngrades } from './downgrade.js'
export { loadTls } from './tls.js'
export type { TlsMaterial } from './tls.js'
export { isTimeZone, parseDuration, windowAt, windowOfIndex, windowSpecKey } from './window.js'
export type { QuotaWindow, WindowSpec } from './window.js'
