// The webhooks of the selected app: endpoints (the secret shown once), deliveries by state,
// redelivery of a dead (or lost) one.
import { adminApi, WEBHOOK_EVENT_TYPES, type App, type WebhookDelivery, type WebhookEndpoint } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { notify, notifyError } from './notice.js';

let selected: App | null = null;

export async function selectWebhookApp(app: App): Promise<void> {
  selected = app;
  byId('webhooks-heading').textContent = `Webhooks of ${app.slug}`;
  byId('webhooks').hidden = false;
  hideSecret();
  try {
    await Promise.all([loadEndpoints(), loadDeliveries()]);
  } catch (error) {
    notifyError(error);
  }
  byId('webhooks-heading').focus();
}

async function loadEndpoints(): Promise<void> {
  if (!selected) return;
  const endpoints = await adminApi.listWebhooks(selected.id);
  byId('webhook-list').replaceChildren(...(endpoints.length ? endpoints.map(endpointItem) : [el('li', { class: 'empty' }, 'No endpoints yet.')]));
}

async function loadDeliveries(): Promise<void> {
  if (!selected) return;
  const deliveries = await adminApi.listDeliveries(selected.id, byId<HTMLSelectElement>('delivery-state').value);
  byId('delivery-list').replaceChildren(...(deliveries.length ? deliveries.map(deliveryItem) : [el('li', { class: 'empty' }, 'No deliveries.')]));
}

function endpointItem(endpoint: WebhookEndpoint): HTMLLIElement {
  return el('li', { 'data-webhook-id': endpoint.id },
    el('div', { class: 'item-head' }, el('code', {}, endpoint.url)),
    facts([['Id', el('code', {}, endpoint.id)], ['Events', endpoint.event_types.join(', ')], ['Created', when(endpoint.created_at)]]),
    el('div', { class: 'row' }, button('Delete endpoint', () => void deleteEndpoint(endpoint), { class: 'danger', 'aria-label': `Delete the endpoint ${endpoint.url}` })));
}

function deliveryItem(delivery: WebhookDelivery): HTMLLIElement {
  const tag = delivery.state === 'delivered' ? 'ok' : delivery.state === 'dead' ? 'danger' : '';
  return el('li', { 'data-delivery-id': delivery.id, 'data-state': delivery.state },
    el('div', { class: 'item-head' }, el('strong', {}, delivery.event_type), el('span', { class: `tag ${tag}` }, delivery.state)),
    facts([
      ['Message', el('code', {}, delivery.message_id)],
      ['Attempts', String(delivery.attempts)],
      ['Last answer', delivery.last_status === null ? delivery.last_error : `${delivery.last_status}${delivery.last_error ? ` (${delivery.last_error})` : ''}`],
      ['Next attempt', when(delivery.next_attempt_at, true)],
      ['Created', when(delivery.created_at, true)],
    ]),
    el('div', { class: 'row' }, button('Redeliver', () => void redeliver(delivery), { 'aria-label': `Redeliver ${delivery.message_id}` })));
}

async function redeliver(delivery: WebhookDelivery): Promise<void> {
  if (!selected) return;
  try {
    await adminApi.redeliver(selected.id, delivery.id);
    notify(`Redelivering ${delivery.message_id}.`);
    await loadDeliveries();
  } catch (error) {
    notifyError(error);
  }
}

async function deleteEndpoint(endpoint: WebhookEndpoint): Promise<void> {
  if (!selected || !confirm(`Delete the endpoint ${endpoint.url}? Its pending deliveries are dropped.`)) return;
  try {
    await adminApi.deleteWebhook(selected.id, endpoint.id);
    notify(`Deleted the endpoint ${endpoint.url}.`);
    await Promise.all([loadEndpoints(), loadDeliveries()]);
  } catch (error) {
    notifyError(error);
  }
}

function hideSecret(): void {
  byId('webhook-secret-value').textContent = '';
  byId('webhook-secret-box').hidden = true;
}

export function wireWebhooks(): void {
  byId('webhook-events').append(...WEBHOOK_EVENT_TYPES.map((type) => el('label', { class: 'check' },
    el('input', { type: 'checkbox', name: 'event_types', value: type }), type)));
  byId<HTMLFormElement>('create-webhook').addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    try {
      const created = await adminApi.createWebhook(selected.id, String(data.get('url')).trim(), data.getAll('event_types').map(String));
      form.reset();
      notify(`Added the endpoint ${created.url}.`);
      byId('webhook-secret-value').textContent = created.secret;
      byId('webhook-secret-box').hidden = false;
      await loadEndpoints();
    } catch (error) {
      notifyError(error);
    }
  });
  byId('dismiss-webhook-secret').addEventListener('click', hideSecret);
  byId('delivery-state').addEventListener('change', () => { loadDeliveries().catch(notifyError); });
  byId('refresh-deliveries').addEventListener('click', () => { loadDeliveries().catch(notifyError); });
}

export function clearWebhooks(): void {
  selected = null;
  hideSecret();
  byId('webhooks').hidden = true;
  byId('webhook-list').replaceChildren();
  byId('delivery-list').replaceChildren();
}
