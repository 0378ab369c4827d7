// Signing keys: the list (no key material) and rotation.
import { adminApi, type SigningKey } from './api.js';
import { byId, el, facts, when } from './dom.js';
import { notify, notifyError } from './notice.js';

export async function loadKeys(): Promise<void> {
  const keys = await adminApi.listSigningKeys();
  byId('key-list').replaceChildren(...keys.map(keyItem));
}

function keyItem(key: SigningKey): HTMLLIElement {
  return el('li', { 'data-kid': key.kid, 'data-status': key.status },
    el('div', { class: 'item-head' }, el('code', {}, key.kid), el('span', { class: `tag ${key.status === 'active' ? 'ok' : ''}` }, key.status)),
    facts([['Created', when(key.created_at)], ['Retired', when(key.retired_at)]]));
}

export function wireKeys(): void {
  byId('rotate-key').addEventListener('click', async () => {
    if (!confirm('Rotate the signing key? The next key becomes active; the active one is retired.')) return;
    try {
      const result = await adminApi.rotateSigningKey();
      notify(`Signing key ${result.kid} is active; ${result.retired_kid} is retired.`);
      await loadKeys();
    } catch (error) {
      notifyError(error);
    }
  });
}
