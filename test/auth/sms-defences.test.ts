// SMS abuse defences per app: the allow-list of countries (403), the verification-ratio guard,
// the velocities per number prefix and per country, and the daily cap (429 with Retry-After),
// checked in that order. Each trip is audited once per window as sms.defence_tripped and sent as
// a webhook; the admin route shows the settings, the codes sent today and this hour's countries.
import t from 'tap';
import { startAuthHarness, type TestApp } from './fixtures/harness.js';
import { startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

const h = await startAuthHarness();
t.teardown(() => h.close());
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());

let app: TestApp;
t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  receiver.received.length = 0;
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['sms.defence_tripped'] });
  if (endpoint.status !== 201) throw new Error(`webhook: ${endpoint.status}`);
});

const HOUR_MS = 3600_000;
const defend = (settings: Record<string, unknown>) => h.admin('PUT', `/admin/apps/${app.id}/sms-defences`, settings);
const send = (phone: string) => h.post('/auth/otp/request', { ...h.credentials(app), phone });
const trips = () => h.sql<{ details: any }[]>`select details from audit_events where type = 'sms.defence_tripped' order by id`;
const secondsToEndOf = (windowMs: number) => String(Math.ceil((windowMs - (h.clock.now() % windowMs)) / 1000));

t.test('a number outside the allow-list of countries is refused with 403 SMS_COUNTRY_NOT_ALLOWED; the trip is audited once and sent as a webhook', async (t) => {
  const settings = await defend({ allowed_calling_codes: ['44', '351'] });
  t.equal(settings.status, 200);
  t.match(settings.body, { allowed_calling_codes: ['44', '351'], daily_cap: null, prefix_hourly: null, country_hourly: null, ratio_min_sent: 20, ratio_min_verified: null });
  for (const phone of ['+14155550100', '+14155550101']) {
    const refused = await send(phone);
    t.equal(refused.status, 403);
    t.same(refused.body, { error: { code: 'SMS_COUNTRY_NOT_ALLOWED', message: 'The app does not send codes to numbers of this country' } });
  }
  t.equal((await send('+447700900100')).status, 200);
  t.equal((await send('+351912345678')).status, 200);
  t.same(h.outbox.messages.map((m) => m.to), ['+447700900100', '+351912345678'], 'nothing was sent to the refused numbers');
  t.same((await trips()).map((e) => e.details), [{ defence: 'allow_list', calling_code: '1' }], 'one trip for the country this hour');
  t.ok(await until(() => receiver.received.length === 1));
  t.equal(receiver.received[0]!.json.type, 'sms.defence_tripped');
  t.same(receiver.received[0]!.json.data.details, { defence: 'allow_list', calling_code: '1' });
});

t.test('the daily cap refuses the codes over it with 429 SMS_DAILY_CAP_REACHED until the UTC day ends', async (t) => {
  t.equal((await defend({ daily_cap: 2 })).status, 200);
  t.equal((await send('+14155550100')).status, 200);
  t.equal((await send('+447700900100')).status, 200);
  const refused = await send('+351912345678');
  t.equal(refused.status, 429);
  t.same(refused.body, { error: { code: 'SMS_DAILY_CAP_REACHED', message: 'The app has sent its SMS codes for today; retry tomorrow' } });
  t.equal(refused.headers.get('retry-after'), secondsToEndOf(24 * HOUR_MS));
  t.equal((await send('+351912345679')).status, 429);
  t.equal((await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' })).status, 200, 'e-mailed codes are not capped');
  t.same((await trips()).map((e) => e.details), [{ defence: 'daily_cap', calling_code: '351', limit: 2 }]);
  t.ok(await until(() => receiver.received.length === 1), 'the webhook is sent');
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/sms-defences`)).body.sent_today, 2, 'the day\'s count is of codes sent, the two refused attempts not included');
});

t.test('the velocity per number prefix refuses a run of neighbouring numbers with 429 SMS_VELOCITY_EXCEEDED', async (t) => {
  t.equal((await defend({ prefix_hourly: 2 })).status, 200);
  t.equal((await send('+14155550100')).status, 200);
  t.equal((await send('+14155550199')).status, 200);
  const refused = await send('+14155550142');
  t.equal(refused.status, 429);
  t.same(refused.body, { error: { code: 'SMS_VELOCITY_EXCEEDED', message: 'Too many codes to numbers like this one; retry later' } });
  t.equal(refused.headers.get('retry-after'), secondsToEndOf(HOUR_MS));
  t.equal((await send('+14155551000')).status, 200, 'another block of numbers passes');
  t.same((await trips()).map((e) => e.details), [{ defence: 'prefix_velocity', calling_code: '1', prefix: '+14155550', limit: 2 }]);
  t.ok(await until(() => receiver.received.length === 1));
  h.clock.advance(HOUR_MS);
  t.equal((await send('+14155550143')).status, 200, 'the next hour starts afresh');
});

t.test('the velocity per country refuses the codes over it with 429 SMS_VELOCITY_EXCEEDED', async (t) => {
  t.equal((await defend({ country_hourly: 2 })).status, 200);
  t.equal((await send('+14155550100')).status, 200);
  t.equal((await send('+12125550100')).status, 200);
  const refused = await send('+13105550100');
  t.equal(refused.status, 429);
  t.equal(refused.body.error.code, 'SMS_VELOCITY_EXCEEDED');
  t.equal(refused.headers.get('retry-after'), secondsToEndOf(HOUR_MS));
  t.equal((await send('+447700900100')).status, 200, 'another country passes');
  t.same((await trips()).map((e) => e.details), [{ defence: 'country_velocity', calling_code: '1', limit: 2 }]);
  t.ok(await until(() => receiver.received.length === 1));
});

t.test('the verification-ratio guard throttles a country whose codes stop being verified, for the rest of the hour', async (t) => {
  t.equal((await defend({ ratio_min_sent: 4, ratio_min_verified: 0.5 })).status, 200);
  const numbers = ['+14155550100', '+12125550100', '+13105550100', '+16175550100'];
  for (const phone of numbers) t.equal((await send(phone)).status, 200);
  const login = await h.post('/auth/otp/verify', { ...h.credentials(app), phone: numbers[0], code: h.outbox.codeFor(numbers[0]!) });
  t.equal(login.status, 200, 'one of four verified: a ratio of 0.25');
  const refused = await send('+17185550100');
  t.equal(refused.status, 429);
  t.same(refused.body, { error: { code: 'SMS_COUNTRY_THROTTLED', message: 'Codes to this country are paused for the rest of the hour; retry later' } });
  t.equal(refused.headers.get('retry-after'), secondsToEndOf(HOUR_MS));
  t.equal((await send('+17185550101')).status, 429, 'still throttled');
  t.equal((await send('+447700900100')).status, 200, 'another country passes');
  t.same((await trips()).map((e) => e.details), [{ defence: 'verification_ratio', calling_code: '1', sent: 4, verified: 1, min_ratio: 0.5 }], 'audited once');
  t.ok(await until(() => receiver.received.length === 1));
  const state = await h.admin('GET', `/admin/apps/${app.id}/sms-defences`);
  t.equal(state.status, 200);
  t.same(state.body.countries_this_hour.map((c: any) => [c.calling_code, c.sent, c.verified, c.throttled_at !== null]), [['1', 4, 1, true], ['44', 1, 0, false]]);
  h.clock.advance(HOUR_MS);
  t.equal((await send('+17185550102')).status, 200, 'the next hour starts afresh');
});

t.test('the settings are checked and are per app', async (t) => {
  const bad = await defend({ allowed_calling_codes: ['4'] });
  t.equal(bad.status, 400);
  t.same(bad.body, { error: { code: 'VALIDATION_ERROR', message: 'Invalid field "allowed_calling_codes": "4" is not a country calling code' } });
  t.equal((await defend({ allowed_calling_codes: ['44'] })).status, 200);
  const other = await h.createApp('app-b');
  const free = await h.post('/auth/otp/request', { ...h.credentials(other), phone: '+14155550100' });
  t.equal(free.status, 200, 'another app without defences sends anywhere');
  const none = await h.admin('GET', `/admin/apps/${other.id}/sms-defences`);
  t.same(none.body, { settings: null, sent_today: 0, countries_this_hour: [] });
});

t.test('the defences run allow-list, ratio guard, prefix, country, daily cap: codes refused for a prefix do not use up the daily cap', async (t) => {
  t.equal((await defend({ allowed_calling_codes: ['1', '44'], prefix_hourly: 1, country_hourly: 3, daily_cap: 3 })).status, 200);
  t.equal((await send('+14155550100')).status, 200);
  for (const phone of ['+14155550101', '+14155550102', '+14155550103', '+14155550104']) {
    const refused = await send(phone);
    t.equal(refused.body.error?.code, 'SMS_VELOCITY_EXCEEDED', `${phone}: the prefix refuses`);
  }
  t.equal((await send('+351912345678')).body.error?.code, 'SMS_COUNTRY_NOT_ALLOWED', 'the allow-list refuses before any counter');
  t.equal((await send('+12125550100')).status, 200, 'another prefix of the country passes: the refused ones were not counted by the country or the day');
  t.equal((await send('+447700900100')).status, 200, 'the third code of the day passes');
  const capped = await send('+447700901200');
  t.equal(capped.body.error?.code, 'SMS_DAILY_CAP_REACHED', 'the fourth is over the daily cap of 3');
  t.same((await trips()).map((e) => e.details.defence), ['prefix_velocity', 'allow_list', 'daily_cap']);
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/sms-defences`)).body.sent_today, 3);
});

t.test('a code counts as sent only when the delivery took it: not when the resend interval refused it, not when the delivery failed', async (t) => {
  t.equal((await defend({ ratio_min_sent: 100, ratio_min_verified: 0.5 })).status, 200);
  t.equal((await send('+14155550100')).status, 200);
  const resend = await send('+14155550100');
  t.equal(resend.status, 429, 'the same number again within the resend interval');
  t.equal(resend.body.error.code, 'RATE_LIMITED');
  h.outbox.failNext = true;
  t.equal((await send('+14155550101')).status, 502, 'the delivery failed');
  const state = await h.admin('GET', `/admin/apps/${app.id}/sms-defences`);
  t.equal(state.body.sent_today, 1);
  t.same(state.body.countries_this_hour.map((c: any) => [c.calling_code, c.sent, c.verified]), [['1', 1, 0]]);
});
