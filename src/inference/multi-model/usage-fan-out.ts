// Fair share across a router's models (docs/tenants.md, "Router mode"): what the tenants used on
// one model process (its usage report, child-link.ts "usage") is charged to them on every other
// loaded model process ("elsewhere"), each of which charges the tenants that have tasks there, so
// that a tenant's share holds across the models.
import type { ModelProcess } from './model-process.js';

/** Charges `tokens`, used on `from`, to every other process in `loaded`. */
export function fanOutUsage(from: ModelProcess, loaded: Iterable<ModelProcess>, tokens: Array<[string, number]>): void {
  if (tokens.length === 0) return;
  for (const proc of loaded) if (proc !== from) proc.chargeElsewhere(tokens);
}
