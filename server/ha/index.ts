export type { LeaderElection } from './election.js'
export { EtcdElection } from './etcd-election.js'
export type { EtcdElectionOptions } from './etcd-election.js'
export { EtcdLedger } from './etcd-ledger.js'
