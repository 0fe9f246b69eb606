import { shareTrivially } from './trivial.js'
import type { ShareRule } from './types.js'

/**
 * Doorman's proportional share, weighted: each claimant's equal share is
 * C·w_i/Σw; those wanting less get what they want; the capacity they leave
 * is shared among the rest in proportion to their unmet demand, in one pass.
 * Work-conserving, but not max-min fair: a claimant with a large unmet
 * demand takes more of the leftover than a max-min level would give it.
 */
export const proportionalShare: ShareRule = (demand, weight, members, count, capacity, out) => {
  const trivial = shareTrivially(demand, members, count, capacity, out)
  if (trivial >= 0) return trivial
  let sumWeight = 0
  for (let k = 0; k < count; k++) sumWeight += weight[members[k]!]!

  let given = 0
  let unmet = 0
  for (let k = 0; k < count; k++) {
    const i = members[k]!
    const share = (capacity * weight[i]!) / sumWeight
    const g = demand[i]! < share ? demand[i]! : share
    out[i] = g
    given += g
    unmet += demand[i]! - g
  }
  const leftover = capacity - given
  let total = 0
  if (leftover > 0 && unmet > 0) {
    const ratio = leftover < unmet ? leftover / unmet : 1
    for (let k = 0; k < count; k++) {
      const i = members[k]!
      const raised = out[i]! + (demand[i]! - out[i]!) * ratio
      const g = raised < demand[i]! ? raised : demand[i]!
      out[i] = g
      total += g
    }
  } else {
    for (let k = 0; k < count; k++) total += out[members[k]!]!
  }
  return total
}
