// The models a router offers, as llama.cpp's preset code lists them (ServerParams.routerModels):
// names and aliases must not collide, as llama-server refuses to start (or, on a reload, drops the
// colliding alias) when they do.
import type { RouterModelSpec } from '../../native/binding.js';

/** Throws when a model's name or alias is another model's name or alias. */
export function checkModelNames(specs: readonly RouterModelSpec[]): void {
  const owner = new Map<string, string>();
  for (const spec of specs) owner.set(spec.name, spec.name);
  for (const spec of specs) {
    for (const alias of spec.aliases) {
      const other = owner.get(alias);
      if (other !== undefined && other !== spec.name) {
        throw new Error(`alias '${alias}' for model '${spec.name}' conflicts with model '${other}'`);
      }
      owner.set(alias, spec.name);
    }
  }
}

/** Two lists' specs that differ in what a running child was started with. */
export function sameLaunch(a: RouterModelSpec, b: RouterModelSpec): boolean {
  return a.presetIni === b.presetIni && a.args.join('\0') === b.args.join('\0');
}
