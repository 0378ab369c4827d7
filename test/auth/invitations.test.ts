// Invitations into a tenant: sent by the admin or the app's backend through the real SMTP
// delivery (smtp-server on 127.0.0.1, as in code-delivery.test.ts; phone invitations go to the
// recording outbox), accepted by signing in as the address (code, passkey's user, upstream) or by
// the token while signed in as it; expiring, one-use, revocable, resendable with a limit,
// listed; audit events and webhooks.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import t from 'tap';
import { createOtpDelivery, type OtpDelivery } from '../../src/auth/otp/delivery.js';
import { renderTemplate } from '../../src/auth/otp/templates.js';
import { INVITATION_RESEND_INTERVAL_MS, INVITATION_TTL_MS } from '../../src/auth/limits.js';
import { startAuthHarness, type AuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

interface Mail { raw: string; to: string[]; subject: string; text: string }
const mails: Mail[] = [];
const smtp = { refuseNext: false };
const smtpServer = new SMTPServer({
  logger: false,
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  onData(stream, session, callback) {
    let raw = '';
    stream.on('data', (chunk: Buffer) => { raw += chunk.toString('utf8'); });
    stream.on('end', () => {
      if (smtp.refuseNext) {
        smtp.refuseNext = false;
        return callback(Object.assign(new Error('mailbox unavailable'), { responseCode: 550 }));
      }
      mails.push({ raw, to: session.envelope.rcptTo.map((r) => r.address), subject: /^Subject: (.*)$/mi.exec(raw)?.[1] ?? '', text: bodyText(raw) });
      callback(null);
    });
  },
});
await new Promise<void>((resolve) => smtpServer.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => smtpServer.close(() => resolve())));

/** The text of a single-part message, quoted-printable or base64 decoded. */
function bodyText(raw: string): string {
  const split = raw.indexOf('\r\n\r\n');
  const headers = raw.slice(0, split);
  const body = raw.slice(split + 4);
  if (/^Content-Transfer-Encoding: quoted-printable/mi.test(headers)) {
    return Buffer.from(body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8');
  }
  if (/^Content-Transfer-Encoding: base64/mi.test(headers)) return Buffer.from(body, 'base64').toString('utf8');
  return body;
}

// E-mail through the service's own SMTP delivery; every message (login codes included) also
// recorded by the harness's outbox, which h.login reads.
const email = createOtpDelivery({ kind: 'smtp', host: '127.0.0.1', port: (smtpServer.server.address() as AddressInfo).port, tls: 'none', from: 'Invites <invites@auth.test>' });
const delivery: OtpDelivery = {
  name: 'test',
  async send(message) {
    if (message.channel === 'email') await email.send(message);
    await h.outbox.send(message);
  },
};
const h: AuthHarness = await startAuthHarness({ otpDelivery: delivery });
t.teardown(() => h.close());
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());

let app: TestApp;
let tenant: string;
t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  tenant = await h.createTenant(app, 'Acme');
  mails.length = 0;
  h.outbox.messages.length = 0;
  receiver.received.length = 0;
});

const TOKEN = /inv_[A-Za-z0-9_-]{43}/;
/** The invitation e-mails (login codes go through the same server). */
const invitationMails = (): Mail[] => mails.filter((m) => !/login code/.test(m.subject));
const tokenIn = (text: string): string => TOKEN.exec(text)?.[0] ?? '';
const adminInvite = (body: Record<string, unknown>, tenantId = tenant) => h.admin('POST', `/admin/apps/${app.id}/tenants/${tenantId}/invitations`, body);
const appInvite = (body: Record<string, unknown>) => h.post('/auth/invitations', { ...h.credentials(app), tenant_id: tenant, ...body });
const list = async (state?: string) => (await h.admin('GET', `/admin/apps/${app.id}/tenants/${tenant}/invitations${state ? `?state=${state}` : ''}`)).body.invitations;
const accept = (tokens: Tokens, token: string) => h.post('/auth/invitations/accept', { ...h.credentials(app), refresh_token: tokens.refresh_token, token });

t.test('end to end: invited by e-mail through SMTP, the person signs in with a code and holds the role; webhooks follow', async (t) => {
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['invitation.created', 'invitation.accepted'] });
  t.equal(endpoint.status, 201);
  const templates = await h.admin('PUT', `/admin/apps/${app.id}/invitation-templates`, {
    email_subject: 'Join {{tenant_name}} at {{app_name}}', accept_url: 'https://shop.example.com/join?invitation={{token}}',
  });
  t.equal(templates.status, 200);
  const created = await adminInvite({ email: 'Dana@Example.com', role: 'staff' });
  t.equal(created.status, 201);
  t.same(Object.keys(created.body).sort(), ['accepted_at', 'accepted_user_id', 'created_at', 'email', 'expires_at', 'id', 'invited_by', 'last_sent_at', 'phone', 'role', 'send_count', 'state', 'tenant_id']);
  t.match(created.body, { tenant_id: tenant, email: 'dana@example.com', phone: null, role: 'staff', state: 'pending', invited_by: 'admin', send_count: 1, accepted_at: null });
  t.equal(Date.parse(created.body.expires_at) - Date.parse(created.body.created_at), INVITATION_TTL_MS);

  t.equal(invitationMails().length, 1, 'one e-mail reached the SMTP server');
  t.same(invitationMails()[0]!.to, ['dana@example.com']);
  t.equal(invitationMails()[0]!.subject, 'Join Acme at App app-a');
  t.match(invitationMails()[0]!.text, /You have been invited to join Acme on App app-a as staff\./);
  t.match(invitationMails()[0]!.text, /Accept: https:\/\/shop\.example\.com\/join\?invitation=inv_[A-Za-z0-9_-]{43}/);
  t.match(invitationMails()[0]!.text, /expires in 7 days/);

  const dana = await h.login(app, 'dana@example.com');
  const me = await h.me(dana.access_token);
  t.same(me.body, { user_id: dana.user_id, app_id: 'app-a', tenant_id: tenant, roles: ['staff'] }, 'the first token already carries the role');
  const [row] = await list('accepted');
  t.match(row, { state: 'accepted', accepted_user_id: dana.user_id });
  t.same(await list('pending'), []);
  t.equal(tokenIn(invitationMails()[0]!.text).length, 47);
  const reused = await accept(dana, tokenIn(invitationMails()[0]!.text));
  t.equal(reused.status, 409, 'the token of an accepted invitation is used up');
  t.equal(reused.body.error.code, 'INVITATION_NOT_PENDING');

  t.ok(await until(() => receiver.received.length === 2), 'both webhooks arrived');
  t.same(receiver.received.map((r) => r.json.type).sort(), ['invitation.accepted', 'invitation.created']);
  const events = await h.sql<{ type: string; actor: string; user_id: string | null; details: any }[]>`
    select type, actor, user_id, details from audit_events where type like 'invitation.%' or type = 'role.assigned' order by id`;
  t.same(events.map((e) => [e.type, e.actor]), [['invitation.created', 'admin'], ['invitation.accepted', 'app'], ['role.assigned', 'app']]);
  t.same(events[0]!.details, { invitation_id: created.body.id, tenant_id: tenant, channel: 'email', destination: 'dana@example.com', role: 'staff' });
  t.equal(events[1]!.user_id, dana.user_id);
});

t.test('the app backend invites with its credentials; a phone number gets an SMS; accepting by token needs the invited address', async (t) => {
  const created = await appInvite({ phone: '+1 (415) 555-0199', role: 'viewer' });
  t.equal(created.status, 201);
  t.match(created.body, { phone: '+14155550199', email: null, invited_by: 'app' });
  t.equal(h.outbox.messages.length, 1);
  const message = h.outbox.messages[0]!;
  const token = message.code;
  t.equal(renderTemplate(message.template.smsText, { code: token, appName: message.template.appName }), `You are invited to Acme on App app-a as viewer: ${token} (expires in 7 days)`, 'the text as the SMS delivery renders it');
  t.match(token, TOKEN, 'without an accept_url the link is the token itself');

  const eve = await h.login(app, 'eve@example.com');
  const wrong = await accept(eve, token);
  t.equal(wrong.status, 403, 'another address cannot take it');
  t.equal(wrong.body.error.code, 'INVITATION_FOR_ANOTHER_ADDRESS');
  t.equal((await list('pending')).length, 1, 'still pending');
  const unknown = await accept(eve, `inv_${'A'.repeat(43)}`);
  t.equal(unknown.status, 404);
  t.equal(unknown.body.error.code, 'INVITATION_NOT_FOUND');

  const listed = await h.post('/auth/invitations/list', { ...h.credentials(app), tenant_id: tenant });
  t.equal(listed.status, 200);
  t.same(listed.body.invitations.map((i: any) => i.id), [created.body.id]);
  const forAnotherTenant = await h.post('/auth/invitations/list', { ...h.credentials(app), tenant_id: '00000000-0000-0000-0000-000000000000' });
  t.equal(forAnotherTenant.body.error.code, 'TENANT_NOT_FOUND');
});

t.test('accepting by token while signed in as the address', async (t) => {
  const fay = await h.login(app, 'fay@example.com');
  await adminInvite({ email: 'fay@example.com', role: 'admin' });
  const accepted = await accept(fay, tokenIn(invitationMails()[0]!.text));
  t.equal(accepted.status, 200);
  t.same(accepted.body, { invitation_id: (await list('accepted'))[0].id, tenant_id: tenant, role: 'admin' });
  const refreshed = await h.refresh(app, fay.refresh_token);
  t.same((await h.me(refreshed.body.access_token)).body.roles, ['admin'], 'the next refresh carries the role');
  const again = await accept({ ...fay, refresh_token: refreshed.body.refresh_token }, tokenIn(invitationMails()[0]!.text));
  t.equal(again.body.error.code, 'INVITATION_NOT_PENDING', 'one use');
});

t.test('expired, revoked and resent invitations', async (t) => {
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['invitation.revoked', 'invitation.expired'] });
  t.equal(endpoint.status, 201);
  const gus = await h.login(app, 'gus@example.com');
  await adminInvite({ email: 'gus@example.com', role: 'staff' });
  const firstToken = tokenIn(invitationMails()[0]!.text);

  const tooSoon = await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/invitations/${(await list())[0].id}/resend`);
  t.equal(tooSoon.status, 429);
  t.equal(tooSoon.body.error.code, 'RATE_LIMITED');
  t.equal(tooSoon.headers.get('retry-after'), String(INVITATION_RESEND_INTERVAL_MS / 1000));
  h.clock.advance(INVITATION_RESEND_INTERVAL_MS);
  const resent = await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/invitations/${(await list())[0].id}/resend`);
  t.equal(resent.status, 200);
  t.equal(resent.body.send_count, 2);
  t.equal(invitationMails().length, 2);
  const secondToken = tokenIn(invitationMails()[1]!.text);
  t.not(secondToken, firstToken);
  t.equal((await accept(gus, firstToken)).body.error.code, 'INVITATION_NOT_FOUND', 'a resend replaces the token');
  for (let send = 3; send <= 5; send++) {
    h.clock.advance(INVITATION_RESEND_INTERVAL_MS);
    t.equal((await h.post('/auth/invitations/resend', { ...h.credentials(app), tenant_id: tenant, invitation_id: resent.body.id })).status, 200, `send ${send}`);
  }
  h.clock.advance(INVITATION_RESEND_INTERVAL_MS);
  const sixth = await h.post('/auth/invitations/resend', { ...h.credentials(app), tenant_id: tenant, invitation_id: resent.body.id });
  t.equal(sixth.status, 429, 'at most five sends');

  h.clock.advance(INVITATION_TTL_MS);
  const expired = await accept(gus, tokenIn(invitationMails().at(-1)!.text));
  t.equal(expired.status, 410);
  t.equal(expired.body.error.code, 'INVITATION_EXPIRED');
  const [row] = await list();
  t.equal(row.state, 'expired', 'marked when the list is read');
  const gusAgain = await h.login(app, 'gus@example.com');
  t.same((await h.me(gusAgain.access_token)).body.roles, [], 'signing in after expiry gives no role');
  t.equal((await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/invitations/${row.id}/resend`)).body.error.code, 'INVITATION_NOT_PENDING');

  const second = await appInvite({ email: 'hal@example.com', role: 'viewer' });
  const revoked = await h.post('/auth/invitations/revoke', { ...h.credentials(app), tenant_id: tenant, invitation_id: second.body.id });
  t.equal(revoked.status, 200);
  t.equal(revoked.body.state, 'revoked');
  const hal = await h.login(app, 'hal@example.com');
  t.same((await h.me(hal.access_token)).body.roles, [], 'a revoked invitation gives no role');
  t.equal((await accept(hal, tokenIn(invitationMails().at(-1)!.text))).body.error.code, 'INVITATION_NOT_PENDING');
  const revokedAgain = await h.admin('DELETE', `/admin/apps/${app.id}/tenants/${tenant}/invitations/${second.body.id}`);
  t.equal(revokedAgain.status, 409);

  t.ok(await until(() => receiver.received.length === 2));
  t.same(receiver.received.map((r) => r.json.type).sort(), ['invitation.expired', 'invitation.revoked']);
  const expiredEvent = await h.sql<{ actor: string }[]>`select actor from audit_events where type = 'invitation.expired'`;
  t.same(expiredEvent, [{ actor: 'service' }], 'recorded once');
});

t.test('refusals: a second pending invitation, an unknown role, a failed delivery stores nothing, bad ids', async (t) => {
  t.equal((await adminInvite({ email: 'ida@example.com', role: 'staff' })).status, 201);
  const duplicate = await appInvite({ email: 'IDA@example.com', role: 'admin' });
  t.equal(duplicate.status, 409);
  t.equal(duplicate.body.error.code, 'INVITATION_PENDING');
  const cases: [string, Promise<any>, number, string][] = [
    ['an unknown role', adminInvite({ email: 'x@example.com', role: 'superuser' }), 400, 'VALIDATION_ERROR'],
    ['no address', adminInvite({ role: 'staff' }), 400, 'VALIDATION_ERROR'],
    ['both addresses', adminInvite({ email: 'x@example.com', phone: '+14155550100', role: 'staff' }), 400, 'VALIDATION_ERROR'],
    ['a tenant of no app', adminInvite({ email: 'x@example.com', role: 'staff' }, '00000000-0000-0000-0000-000000000000'), 404, 'TENANT_NOT_FOUND'],
    ['a tenant id that is not a UUID', adminInvite({ email: 'x@example.com', role: 'staff' }, 'acme'), 404, 'TENANT_NOT_FOUND'],
    ['an unknown state filter', h.admin('GET', `/admin/apps/${app.id}/tenants/${tenant}/invitations?state=lost`), 400, 'VALIDATION_ERROR'],
    ['revoking an unknown invitation', h.admin('DELETE', `/admin/apps/${app.id}/tenants/${tenant}/invitations/00000000-0000-0000-0000-000000000000`), 404, 'INVITATION_NOT_FOUND'],
    ['a malformed token', h.post('/auth/invitations/accept', { ...h.credentials(app), refresh_token: 'x', token: 'inv_short' }), 400, 'VALIDATION_ERROR'],
    ['an accept_url without {{token}}', h.admin('PUT', `/admin/apps/${app.id}/invitation-templates`, { accept_url: 'https://shop.example.com/join' }), 400, 'VALIDATION_ERROR'],
    ['a text without {{link}}', h.admin('PUT', `/admin/apps/${app.id}/invitation-templates`, { email_text: 'Come in' }), 400, 'VALIDATION_ERROR'],
  ];
  for (const [name, reply, status, code] of cases) {
    const answer = await reply;
    t.equal(answer.status, status, name);
    t.equal(answer.body.error?.code, code, name);
  }
  smtp.refuseNext = true;
  const undelivered = await adminInvite({ email: 'jo@example.com', role: 'staff' });
  t.equal(undelivered.status, 502);
  t.equal(undelivered.body.error.code, 'INVITATION_DELIVERY_FAILED');
  t.same((await list()).map((i: any) => i.email), ['ida@example.com'], 'nothing stored for the undelivered one');
  t.equal((await h.sql`select 1 from audit_events where type = 'invitation.created'`).length, 1);
});
