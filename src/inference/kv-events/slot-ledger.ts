// SlotLedger: the blocks the slots' KV cells hold, from the engine's cache changes
// (native/cache-events.h), as the events a router reads: a block key that a first slot comes to
// hold is stored (BlockStored, with its tokens and the key of the block before it, held by the
// same slot and so published before), one that no slot holds any more is removed (BlockRemoved).
// Slots sharing a prefix hold the same keys: a key counts its holders. A slot's cache computed
// with adapters that name no model (several, or a scale other than 1) is not published.
// The host-memory cache's entries and the disk tier's files are holders too, each in a ledger of
// its own medium (TierLedgers): an entry is stored whole and removed whole.
import type { CacheChange } from '../../native/binding.js';
import { extraKeysFor, rootChain, sequenceBlocks, type Block, type BlockKeyRule } from './block-keys.js';
import type { KvCacheEvent, Medium } from './event-batch.js';

/** Whose blocks: the model name routers use, and for an adapter its id (vLLM's lora_id: index + 1). */
export interface LedgerModel {
  name: string;
  adapter: { id: number; name: string } | null;
}

export interface ModelEvents {
  model: string;
  events: KvCacheEvent[];
}

interface SlotBlocks {
  blocks: Block[];
  model: LedgerModel | null;
}

export class SlotLedger {
  private readonly slots = new Map<number, SlotBlocks>();
  /** Holders of each key, and its model's name. */
  private readonly held = new Map<bigint, { count: number; model: string }>();

  /** `modelOf`: the model a slot's cache belongs to, from its adapter scales (null: none publishable). */
  constructor(private readonly rule: BlockKeyRule, private readonly modelOf: (lora: readonly number[]) => LedgerModel | null, private readonly medium: Medium = 'GPU') {}

  /** The events of `changes`, in order, each with its model's name. */
  apply(changes: readonly CacheChange[]): ModelEvents[] {
    const out: ModelEvents[] = [];
    const emit = (model: string, event: KvCacheEvent): void => {
      const last = out[out.length - 1];
      if (last && last.model === model) last.events.push(event);
      else out.push({ model, events: [event] });
    };
    for (const change of changes) this.applyOne(change, emit);
    return out;
  }

  /** Forgets every block (the engine's cells are gone): the caller publishes AllBlocksCleared. */
  reset(): void {
    this.slots.clear();
    this.held.clear();
  }

  private applyOne(change: CacheChange, emit: (model: string, event: KvCacheEvent) => void): void {
    const slot = this.slots.get(change.slot) ?? { blocks: [], model: null };
    this.slots.set(change.slot, slot);
    const keep = Math.floor(change.keep / this.rule.blockSize);
    const removed: bigint[] = [];
    for (const block of slot.blocks.splice(keep)) {
      const h = this.held.get(block.key)!;
      if (--h.count === 0) {
        this.held.delete(block.key);
        removed.push(block.key);
      }
    }
    if (removed.length > 0 && slot.model) emit(slot.model.name, { type: 'BlockRemoved', blockHashes: removed, medium: this.medium });
    if (keep === 0 && change.tokens.length === 0) {
      this.slots.delete(change.slot); // an entry gone, or a slot emptied: nothing to remember
      return;
    }
    const model = keep > 0 ? slot.model : this.modelOf(change.lora);
    slot.model = model;
    if (!model || change.tokens.length === 0) return;
    const extra = extraKeysFor(model.adapter?.name ?? null);
    const parent = keep > 0 ? slot.blocks[keep - 1]!.chain : rootChain(this.rule);
    const added = sequenceBlocks(this.rule, Array.from(change.tokens), extra, parent);
    let run: Block[] = [];
    let runParent: bigint | null = keep > 0 ? slot.blocks[keep - 1]!.key : null;
    const flush = (): void => {
      if (run.length === 0) return;
      emit(model.name, {
        type: 'BlockStored', blockHashes: run.map((b) => b.key), parentBlockHash: runParent, tokenIds: run.flatMap((b) => b.tokens),
        blockSize: this.rule.blockSize, loraId: model.adapter ? model.adapter.id : null, medium: this.medium, loraName: model.adapter?.name ?? null,
        extraKeys: run.map(() => extra),
      });
      run = [];
    };
    for (const block of added) {
      const h = this.held.get(block.key);
      if (h) {
        h.count++;
        flush();
        runParent = block.key;
      } else {
        this.held.set(block.key, { count: 1, model: model.name });
        if (run.length === 0 && slot.blocks.length > 0) runParent = slot.blocks[slot.blocks.length - 1]!.key;
        run.push(block);
      }
      slot.blocks.push(block);
    }
    flush();
  }
}

/** The medium of each tier of native/cache-events.h: a slot's cells, a host-memory entry, a disk file. */
export const TIER_MEDIUMS: readonly Medium[] = ['GPU', 'CPU', 'STORAGE'];

/** One ledger per tier, each publishing under its medium; changes are applied in order. */
export class TierLedgers {
  private readonly ledgers: SlotLedger[];

  constructor(rule: BlockKeyRule, modelOf: (lora: readonly number[]) => LedgerModel | null) {
    this.ledgers = TIER_MEDIUMS.map((medium) => new SlotLedger(rule, modelOf, medium));
  }

  apply(changes: readonly CacheChange[]): ModelEvents[] {
    const out: ModelEvents[] = [];
    for (let at = 0; at < changes.length;) {
      const tier = changes[at]!.tier;
      let end = at + 1;
      while (end < changes.length && changes[end]!.tier === tier) end++;
      for (const batch of this.ledgers[tier]!.apply(changes.slice(at, end))) {
        const last = out[out.length - 1];
        if (last && last.model === batch.model) last.events.push(...batch.events);
        else out.push(batch);
      }
      at = end;
    }
    return out;
  }
}
