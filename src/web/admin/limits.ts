// Rate limits: the subjects blocked now (lifting one starts its count over) and the limits in force.
import { adminApi, type RateLimitBlock } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { notify, notifyError } from './notice.js';

export async function loadLimits(): Promise<void> {
  const { rules, blocks } = await adminApi.listRateLimits();
  byId('block-list').replaceChildren(...(blocks.length ? blocks.map(blockItem) : [el('li', { class: 'empty' }, 'Nothing is blocked.')]));
  byId('limit-rules').replaceChildren(facts(Object.entries(rules).map(([rule, limit]) => [rule, `${limit.max_hits} per ${limit.window_seconds} s`])));
}

function blockItem(block: RateLimitBlock): HTMLLIElement {
  return el('li', { 'data-rule': block.rule, 'data-subject': block.subject },
    el('div', { class: 'item-head' }, el('strong', {}, block.rule), el('span', { class: 'tag danger' }, `${block.hits} / ${block.max_hits}`)),
    facts([['Subject', el('code', {}, block.subject)], ['Blocked until', when(block.blocked_until, true)]]),
    el('div', { class: 'row' }, button('Lift block', () => void lift(block), { 'aria-label': `Lift the ${block.rule} block of ${block.subject}` })));
}

async function lift(block: RateLimitBlock): Promise<void> {
  if (!confirm(`Lift the ${block.rule} block of ${block.subject}? Its count starts over.`)) return;
  try {
    await adminApi.liftBlock(block.rule, block.subject);
    notify(`Lifted the ${block.rule} block of ${block.subject}.`);
    await loadLimits();
  } catch (error) {
    notifyError(error);
  }
}

export function wireLimits(): void {
  byId('refresh-blocks').addEventListener('click', () => { loadLimits().catch(notifyError); });
}

export function clearLimits(): void {
  byId('block-list').replaceChildren();
  byId('limit-rules').replaceChildren();
}
