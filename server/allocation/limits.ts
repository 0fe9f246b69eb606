/**
 * Bounds on allocation input. They keep every sum and product the engine
 * forms (up to a million claimants × weight × level) far from overflow, so
 * no finite input can produce a NaN or an Infinity.
 */
export const allocationLimits = Object.freeze({
  /** Largest capacity, demand or tenant cap, in the resource's unit. */
  maxQuantity: 1e15,
  /** Smallest client or tenant weight. */
  minWeight: 1e-6,
  /** Largest client or tenant weight. */
  maxWeight: 1e6,
  /** Largest |priority|; priorities are integers. */
  maxPriority: 1_000_000,
  /** Longest client id or tenant name, in UTF-16 code units. */
  maxIdLength: 1024,
})
