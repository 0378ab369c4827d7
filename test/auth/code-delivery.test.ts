// Login codes delivered for real, in production mode: by e-mail through a local SMTP server
// (smtp-server, STARTTLS with a certificate made for the test, AUTH), by SMS through a local
// Twilio-shaped endpoint; per-app sender and texts; retries of failures that may pass, none of
// permanent ones; and no code in the service's log, even when a provider echoes it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import t from 'tap';
import { parseAuthServerArgs } from '../../src/auth/config.js';
import { startAuthHarness, type TestApp } from './fixtures/harness.js';

process.env.NODE_ENV = 'production';

// A certificate for 127.0.0.1 and its key, made with openssl for this run.
const tlsDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-smtp-tls-'));
t.teardown(() => fs.rm(tlsDir, { recursive: true, force: true }));
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
  '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(tlsDir, 'key.pem'), '-out', path.join(tlsDir, 'cert.pem')], { stdio: 'ignore' });

interface Mail { raw: string; secure: boolean; user: string | undefined; from: string; to: string[] }

/** What the SMTP server does with the next messages: accept, or refuse with a code and text. */
const smtp = { mails: [] as Mail[], refused: [] as string[], attempts: 0, refusals: [] as Array<{ code: number; text: (raw: string) => string }> };
const smtpServer = new SMTPServer({
  key: await fs.readFile(path.join(tlsDir, 'key.pem')),
  cert: await fs.readFile(path.join(tlsDir, 'cert.pem')),
  logger: false,
  onAuth(auth, _session, callback) {
    if (auth.username === 'mailer' && auth.password === 'mail-secret') callback(null, { user: 'mailer' });
    else callback(Object.assign(new Error('bad credentials'), { responseCode: 535 }));
  },
  onData(stream, session, callback) {
    let raw = '';
    stream.on('data', (chunk: Buffer) => { raw += chunk.toString('utf8'); });
    stream.on('end', () => {
      smtp.attempts++;
      const refusal = smtp.refusals.shift();
      if (refusal) {
        smtp.refused.push(raw);
        return callback(Object.assign(new Error(refusal.text(raw)), { responseCode: refusal.code }));
      }
      smtp.mails.push({ raw, secure: session.secure, user: session.user as string | undefined, from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '', to: session.envelope.rcptTo.map((r) => r.address) });
      callback(null);
    });
  },
});
await new Promise<void>((resolve) => smtpServer.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => smtpServer.close(() => resolve())));

interface Sms { path: string; authorization: string | undefined; form: Record<string, string> }
/** The Twilio-shaped endpoint: records each request and answers the next status of `statuses` (201 when empty). */
const sms = { requests: [] as Sms[], statuses: [] as number[] };
const smsServer = http.createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const form = Object.fromEntries(new URLSearchParams(body));
    sms.requests.push({ path: req.url!, authorization: req.headers.authorization, form });
    const status = sms.statuses.shift() ?? 201;
    // A provider that echoes the message in its answer, errors included.
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(status === 201 ? { sid: 'SM1', status: 'queued', body: form.Body } : { code: 21211, message: `Rejected: ${form.Body}` }));
  });
});
await new Promise<void>((resolve) => smsServer.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => { smsServer.closeAllConnections(); smsServer.close(() => resolve()); }));

const h = await startAuthHarness({
  otpDelivery: [
    { kind: 'smtp', host: '127.0.0.1', port: (smtpServer.server.address() as AddressInfo).port, tls: 'starttls', user: 'mailer', password: 'mail-secret', from: 'Auth <login@auth.test>', caFile: path.join(tlsDir, 'cert.pem') },
    { kind: 'sms', baseUrl: `http://127.0.0.1:${(smsServer.address() as AddressInfo).port}/twilio`, accountSid: 'AC123', authToken: 'sms-token', from: '+15005550006' },
  ],
});
t.teardown(() => h.close());

let app: TestApp;
t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  smtp.mails.length = 0;
  smtp.refused.length = 0;
  smtp.attempts = 0;
  smtp.refusals.length = 0;
  sms.requests.length = 0;
  sms.statuses.length = 0;
});

const requestCode = (to: { email?: string; phone?: string }) => h.post('/auth/otp/request', { ...h.credentials(app), ...to });

function header(raw: string, name: string): string | undefined {
  return new RegExp(`^${name}: (.*)$`, 'mi').exec(raw)?.[1];
}

function codeIn(text: string): string {
  const match = /\b(\d{6})\b/.exec(text);
  if (!match) throw new Error(`no code in ${text}`);
  return match[1]!;
}

t.test('an e-mailed code goes through STARTTLS and AUTH, from the default sender, with the default texts, and logs in', async (t) => {
  const reply = await requestCode({ email: 'Ann@Example.com' });
  t.equal(reply.status, 200);
  t.equal(smtp.mails.length, 1);
  const [mail] = smtp.mails;
  t.equal(mail!.secure, true, 'the session was upgraded to TLS');
  t.equal(mail!.user, 'mailer', 'authenticated');
  t.equal(mail!.from, 'login@auth.test');
  t.same(mail!.to, ['ann@example.com']);
  t.equal(header(mail!.raw, 'Subject'), 'Your App app-a login code');
  t.equal(header(mail!.raw, 'From'), 'Auth <login@auth.test>');
  const code = codeIn(mail!.raw.slice(mail!.raw.indexOf('\r\n\r\n')));
  t.match(mail!.raw, `Your App app-a login code is ${code}.`);
  t.match(mail!.raw, 'It expires in 10 minutes.');
  const verified = await h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code });
  t.equal(verified.status, 200, 'the e-mailed code logs in');
});

t.test('an SMS code goes to the Twilio-shaped API with Basic auth and logs in', async (t) => {
  t.equal((await requestCode({ phone: '+1 (415) 555-0123' })).status, 200);
  t.equal(sms.requests.length, 1);
  const [request] = sms.requests;
  t.equal(request!.path, '/twilio/2010-04-01/Accounts/AC123/Messages.json');
  t.equal(request!.authorization, `Basic ${Buffer.from('AC123:sms-token').toString('base64')}`);
  const code = codeIn(request!.form.Body!);
  t.same(request!.form, { To: '+14155550123', From: '+15005550006', Body: `${code} is your App app-a login code. It expires in 10 minutes.` });
  t.equal(smtp.mails.length, 0, 'phone numbers do not go to the mailer');
  t.equal((await h.post('/auth/otp/verify', { ...h.credentials(app), phone: '+14155550123', code })).status, 200);
});

t.test('an app\'s own sender and texts are used; the admin API checks them', async (t) => {
  const saved = await h.admin('PUT', `/admin/apps/${app.id}/message-templates`, {
    email_from: 'Shop <no-reply@shop.test>', email_subject: '{{app_name}}: your code', email_text: 'Code: {{code}}\nValid {{minutes}} min.', sms_text: 'Shop code {{code}}',
  });
  t.equal(saved.status, 200);
  t.match(saved.body, { email_from: 'Shop <no-reply@shop.test>', email_subject: '{{app_name}}: your code', defaults: { email_subject: 'Your {{app_name}} login code' } });
  t.same((await h.admin('GET', `/admin/apps/${app.id}/message-templates`)).body, saved.body);
  await requestCode({ email: 'bob@example.com' });
  const [mail] = smtp.mails;
  t.equal(mail!.from, 'no-reply@shop.test');
  t.equal(header(mail!.raw, 'Subject'), 'App app-a: your code');
  t.match(mail!.raw, /Code: \d{6}\r?\nValid 10 min\./);
  await requestCode({ phone: '+14155550123' });
  t.match(sms.requests[0]!.form.Body, /^Shop code \d{6}$/);

  for (const [body, field] of [
    [{ email_text: 'no code here' }, 'email_text'],
    [{ sms_text: 'none' }, 'sms_text'],
    [{ email_from: 'not an address' }, 'email_from'],
    [{ email_subject: 'two\nlines' }, 'email_subject'],
    [{ unknown: 'x' }, undefined],
  ] as const) {
    const reply = await h.admin('PUT', `/admin/apps/${app.id}/message-templates`, body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
    if (field) t.match(reply.body.error.message, field);
  }
  const reset = await h.admin('PUT', `/admin/apps/${app.id}/message-templates`, {});
  t.match(reset.body, { email_from: null, email_subject: null, email_text: null, sms_text: null });
});

t.test('failures that may pass are retried with backoff; permanent ones are not', async (t) => {
  smtp.refusals.push({ code: 421, text: () => 'try again later' });
  t.equal((await requestCode({ email: 'ann@example.com' })).status, 200, 'a 421 is retried');
  t.same([smtp.attempts, smtp.mails.length], [2, 1]);

  smtp.attempts = 0;
  smtp.refusals.push({ code: 550, text: () => 'mailbox unavailable' });
  const refused = await requestCode({ email: 'bob@example.com' });
  t.equal(refused.status, 502);
  t.same(refused.body, { error: { code: 'OTP_DELIVERY_FAILED', message: 'The code could not be delivered; retry later' } });
  t.equal(smtp.attempts, 1, 'a 550 is not retried');

  sms.statuses.push(503, 503);
  t.equal((await requestCode({ phone: '+14155550123' })).status, 200, 'two 503s, then the third try');
  t.equal(sms.requests.length, 3);
  sms.statuses.push(503, 503, 503);
  t.equal((await requestCode({ phone: '+14155550124' })).status, 502, 'three tries in all');
  t.equal(sms.requests.length, 6);
  sms.statuses.push(400);
  t.equal((await requestCode({ phone: '+14155550125' })).status, 502);
  t.equal(sms.requests.length, 7, 'a 400 is not retried');
  const failed = await h.sql`select details->>'destination' as to from audit_events where type = 'otp.delivery_failed' order by id`;
  t.same(failed.map((r) => r.to), ['bob@example.com', '+14155550124', '+14155550125'], 'each failure is reported in the audit trail');
});

t.test('in production no code reaches the log, even when the provider echoes it in its error', async (t) => {
  smtp.refusals.push({ code: 554, text: (raw) => `rejected message: ${raw.replace(/\r?\n/g, ' ')}` });
  t.equal((await requestCode({ email: 'ann@example.com' })).status, 502);
  sms.statuses.push(400);
  t.equal((await requestCode({ phone: '+14155550123' })).status, 502);
  t.equal((await requestCode({ email: 'bob@example.com' })).status, 200);
  t.equal((await requestCode({ phone: '+14155550199' })).status, 200);
  const codes = [
    ...[...smtp.refused, ...smtp.mails.map((m) => m.raw)].map((raw) => codeIn(raw.slice(raw.indexOf('\r\n\r\n')))),
    ...sms.requests.map((r) => codeIn(r.form.Body!)),
  ];
  t.equal(codes.length, 4, 'the codes of the two failures and the two successes');
  const logs = (await h.loggedLines()).join('\n');
  t.match(logs, /OTP_DELIVERY_FAILED/, 'the failures were logged');
  t.match(logs, /\[code\]/, 'with the code cut out of the provider\'s echo');
  for (const code of codes) t.notMatch(logs, code, `code ${code} is not in the log`);
});

t.test('the log delivery is refused in production; smtp and sms are configured from the environment', async (t) => {
  const env = { AUTH_ADMIN_KEY: 'admin-key-0123456789' };
  const options = parseAuthServerArgs([], {
    ...env, AUTH_OTP_DELIVERY: 'smtp,sms', AUTH_SMTP_HOST: 'smtp.example.com', AUTH_SMTP_PORT: '465', AUTH_SMTP_USER: 'u', AUTH_SMTP_PASSWORD: 'p',
    AUTH_SMTP_FROM: 'login@example.com', AUTH_SMS_ACCOUNT_SID: 'AC1', AUTH_SMS_AUTH_TOKEN: 'tok', AUTH_SMS_MESSAGING_SERVICE_SID: 'MG1',
  });
  if (options === 'help') throw new Error('unexpected help');
  t.same(options.service.otpDelivery, [
    { kind: 'smtp', host: 'smtp.example.com', port: 465, tls: 'implicit', user: 'u', password: 'p', from: 'login@example.com' },
    { kind: 'sms', accountSid: 'AC1', authToken: 'tok', messagingServiceSid: 'MG1' },
  ]);
  t.throws(() => parseAuthServerArgs([], { ...env, AUTH_OTP_DELIVERY: 'smtp', AUTH_SMTP_FROM: 'a@b.c' }), /needs --smtp-host/);
  t.throws(() => parseAuthServerArgs([], { ...env, AUTH_OTP_DELIVERY: 'sms', AUTH_SMS_ACCOUNT_SID: 'a', AUTH_SMS_AUTH_TOKEN: 'b' }), /exactly one of --sms-from/);
  t.throws(() => parseAuthServerArgs([], { ...env, AUTH_OTP_DELIVERY: 'smtp', AUTH_SMTP_HOST: 'h', AUTH_SMTP_FROM: 'a@b.c', AUTH_SMTP_TLS: 'maybe' }), /AUTH_SMTP_TLS/);
  const { createOtpDelivery } = await import('../../src/auth/otp/delivery.js');
  t.throws(() => createOtpDelivery([{ kind: 'smtp', host: 'h', port: 25, tls: 'none', from: 'a@b.c' }, { kind: 'log' }]), /refused when NODE_ENV=production/);
});
