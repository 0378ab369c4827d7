// The SMS defences of the selected app: its settings (allow-list of calling codes, daily cap,
// velocities, verification-ratio guard), the codes sent today, and this hour's countries with
// their sent and verified counts, a throttled one marked.
import { adminApi, type App, type SmsDefences, type SmsDefencesState } from './api.js';
import { byId, el, when } from './dom.js';
import { notify, notifyError } from './notice.js';

let selected: App | null = null;

export async function selectSmsApp(app: App): Promise<void> {
  selected = app;
  byId('sms-heading').textContent = `SMS defences of ${app.slug}`;
  byId('sms-defences').hidden = false;
  try {
    show(await adminApi.getSmsDefences(app.id));
  } catch (error) {
    notifyError(error);
  }
  byId('sms-heading').focus();
}

const input = (id: string): HTMLInputElement => byId<HTMLInputElement>(id);

function show(state: SmsDefencesState): void {
  const settings = state.settings;
  input('sms-allowed').value = settings?.allowed_calling_codes?.join(', ') ?? '';
  input('sms-daily-cap').value = settings?.daily_cap?.toString() ?? '';
  input('sms-prefix-hourly').value = settings?.prefix_hourly?.toString() ?? '';
  input('sms-country-hourly').value = settings?.country_hourly?.toString() ?? '';
  input('sms-ratio').value = settings?.ratio_min_verified?.toString() ?? '';
  input('sms-ratio-sent').value = settings && settings.ratio_min_sent !== 20 ? settings.ratio_min_sent.toString() : '';
  byId('sms-today').textContent = `${state.sent_today} SMS code(s) sent today (UTC).`;
  byId('sms-countries').replaceChildren(...(state.countries_this_hour.length
    ? state.countries_this_hour.map((c) => el('li', { 'data-calling-code': c.calling_code },
      el('div', { class: 'item-head' }, el('strong', {}, `+${c.calling_code}`),
        el('span', { class: c.throttled_at ? 'tag danger' : 'tag ok' }, c.throttled_at ? `throttled since ${when(c.throttled_at)}` : 'sending')),
      el('p', {}, `${c.sent} sent, ${c.verified} verified`)))
    : [el('li', { class: 'empty' }, 'No SMS codes this hour.')]));
}

/** The form's values: empty is null (off); numbers as typed (the server checks them). */
function values(): SmsDefences {
  const number = (id: string): number | null => (input(id).value.trim() === '' ? null : Number(input(id).value.trim()));
  const codes = input('sms-allowed').value.split(',').map((code) => code.trim().replace(/^\+/, '')).filter(Boolean);
  return {
    allowed_calling_codes: codes.length ? codes : null,
    daily_cap: number('sms-daily-cap'),
    prefix_hourly: number('sms-prefix-hourly'),
    country_hourly: number('sms-country-hourly'),
    ratio_min_verified: number('sms-ratio'),
    ...(number('sms-ratio-sent') === null ? {} : { ratio_min_sent: number('sms-ratio-sent')! }),
  };
}

export function wireSms(): void {
  byId<HTMLFormElement>('sms-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    try {
      await adminApi.setSmsDefences(selected.id, values());
      show(await adminApi.getSmsDefences(selected.id));
      notify(`Saved the SMS defences of ${selected.slug}.`);
    } catch (error) {
      notifyError(error);
    }
  });
}

export function clearSms(): void {
  selected = null;
  byId<HTMLFormElement>('sms-form').reset();
  byId('sms-countries').replaceChildren();
  byId('sms-defences').hidden = true;
}
