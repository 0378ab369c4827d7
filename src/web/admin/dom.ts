// Small DOM helpers of the console. Text always goes in as text nodes, never as HTML.

export const byId = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;

type Child = Node | string | null | undefined | false;

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) if (child) node.append(child);
  return node;
}

export function button(label: string, onClick: () => void, attrs: Record<string, string> = {}): HTMLButtonElement {
  const node = el('button', { type: 'button', ...attrs }, label);
  node.addEventListener('click', onClick);
  return node;
}

/** `2026-11-23 06:21 UTC` (with `seconds`, `06:21:07`) from an ISO timestamp. */
export function when(iso: string | null, seconds = false): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, seconds ? 19 : 16)} UTC` : '–';
}

/** A definition list of label → value pairs. */
export function facts(pairs: Array<[string, Child]>): HTMLDListElement {
  return el('dl', { class: 'facts' }, ...pairs.flatMap(([label, value]) => [el('dt', {}, label), el('dd', {}, value ?? '–')]));
}
