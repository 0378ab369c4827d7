// LoRA adapters of the running server: their current scales (GET/POST /lora-adapters) and the
// scales a request runs with. A task copies the scales when it is submitted, so a change of
// scales affects the next requests and never one already generating.
import { badRequest } from '../errors.js';

export interface LoraEntry {
  id: number;
  path: string;
  scale: number;
}

export interface LoraSelection {
  id?: number;
  path?: string;
  scale: number;
}

export class LoraRegistry {
  private readonly entries: LoraEntry[];

  constructor(adapters: Array<{ path: string; scale: number }>) {
    this.entries = adapters.map((a, id) => ({ id, path: a.path, scale: a.scale }));
  }

  get size(): number {
    return this.entries.length;
  }

  list(): LoraEntry[] {
    return this.entries.map((e) => ({ ...e }));
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

  /** Sets new server-wide scales (from resolve()). */
  apply(scales: readonly number[]): void {
    scales.forEach((s, i) => {
      this.entries[i]!.scale = s;
    });
  }
}
