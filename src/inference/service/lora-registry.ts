// LoRA adapters of the running server: their current scales (GET/POST /lora-adapters) and the
// scales a request runs with. A task copies the scales when it is submitted, so a change of
// scales affects the next requests and never one already generating.
// An adapter is also a model name: its file name without the .gguf extension, and a request whose
// `model` field names it runs with that adapter alone at scale 1, as vLLM serves a LoRA module by
// name (what GIE's and llm-d's routers send).
import { basename } from 'node:path';
import { badRequest } from '../errors.js';

export interface LoraEntry {
  id: number;
  path: string;
  scale: number;
  /** The name requests give in `model` to run with this adapter alone. */
  name: string;
}

/** An adapter's model name: its file name without a .gguf extension. */
export function adapterName(path: string): string {
  return basename(path).replace(/\.gguf$/i, '');
}

export interface LoraSelection {
  id?: number;
  path?: string;
  scale: number;
}

export class LoraRegistry {
  private readonly entries: LoraEntry[];

  constructor(adapters: Array<{ path: string; scale: number }>) {
    this.entries = adapters.map((a, id) => ({ id, path: a.path, scale: a.scale, name: adapterName(a.path) }));
  }

  get size(): number {
    return this.entries.length;
  }

  /** As GET /lora-adapters lists them (llama-server's fields). */
  list(): Array<Omit<LoraEntry, 'name'>> {
    return this.entries.map(({ id, path, scale }) => ({ id, path, scale }));
  }

  /** The adapters' model names, by index. */
  names(): string[] {
    return this.entries.map((e) => e.name);
  }

  /** The server-wide scales, one per adapter. */
  scales(): number[] {
    return this.entries.map((e) => e.scale);
  }

  /**
   * Scales for a selection ({id or path, scale} items): listed adapters take their scale, the
   * others 0 (llama-server's rule). Unknown ids or paths and non-finite scales are 400s.
   */
  resolve(selection: readonly LoraSelection[], field: string): number[] {
    const scales = this.entries.map(() => 0);
    selection.forEach((item, i) => {
      if (typeof item.scale !== 'number' || !Number.isFinite(item.scale)) {
        throw badRequest(`Invalid field "${field}[${i}].scale": must be a finite number`, { field: `${field}[${i}].scale` });
      }
      const entry = item.id !== undefined ? this.entries.find((e) => e.id === item.id) : this.entries.find((e) => e.path === item.path);
      if (!entry) {
        const which = item.id !== undefined ? `id ${item.id}` : `path "${item.path}"`;
        throw badRequest(`Invalid field "${field}[${i}]": no loaded LoRA adapter has ${which}`, { field: `${field}[${i}]` });
      }
      scales[entry.id] = item.scale;
    });
    return scales;
  }

  /** The scales of a request whose `model` names an adapter (it alone, at 1), or null when none is named. */
  forModel(model: string | null | undefined): number[] | null {
    const entry = model ? this.entries.find((e) => e.name === model) : undefined;
    return entry ? this.entries.map((e) => (e === entry ? 1 : 0)) : null;
  }

  /** Sets new server-wide scales (from resolve()). */
  apply(scales: readonly number[]): void {
    scales.forEach((s, i) => {
      this.entries[i]!.scale = s;
    });
  }
}
