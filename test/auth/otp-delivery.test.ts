// OTP delivery: the `webhook` and `log` deliveries, and a service configured with a webhook.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { logOtpDelivery, webhookOtpDelivery } from '../../src/auth/otp/delivery.js';
import { startAuthHarness } from './fixtures/harness.js';

interface Received {
  method: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A local SMS/e-mail bridge that records requests and answers `status` (after `delayMs`). */
async function startBridge(t: { teardown(fn: () => unknown): void }, status = 204, delayMs = 0): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      received.push({ method: req.method!, headers: req.headers, body });
      setTimeout(() => res.writeHead(status).end(), delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/send`, received };
}

const message = { channel: 'phone' as const, to: '+14155550123', code: '012345', appId: '6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f' };

t.test('the webhook POSTs {purpose, channel, to, code, app_id} as JSON with the bearer secret', async (t) => {
  const bridge = await startBridge(t);
  await webhookOtpDelivery({ url: bridge.url, secret: 'bridge-secret' }).send(message);
  t.equal(bridge.received.length, 1);
  const [request] = bridge.received;
  t.equal(request!.method, 'POST');
  t.equal(request!.headers['content-type'], 'application/json');
  t.equal(request!.headers.authorization, 'Bearer bridge-secret');
  t.same(JSON.parse(request!.body), { purpose: 'sign_in', channel: 'phone', to: '+14155550123', code: '012345', app_id: message.appId });
});

t.test('an invitation reaches the webhook as one: purpose "invitation" and its accept link, no code', async (t) => {
  const bridge = await startBridge(t);
  const link = 'https://app.example/accept?invitation=inv_abc';
  await webhookOtpDelivery({ url: bridge.url }).send({ ...message, purpose: 'invitation', code: link });
  t.same(JSON.parse(bridge.received[0]!.body), { purpose: 'invitation', channel: 'phone', to: '+14155550123', link, app_id: message.appId });
});

t.test('the webhook sends no Authorization header without a secret', async (t) => {
  const bridge = await startBridge(t);
  await webhookOtpDelivery({ url: bridge.url }).send(message);
  t.equal(bridge.received[0]!.headers.authorization, undefined);
});

t.test('a webhook answering non-2xx fails the delivery', async (t) => {
  const bridge = await startBridge(t, 500);
  await t.rejects(webhookOtpDelivery({ url: bridge.url }).send(message), /OTP webhook answered 500/);
});

t.test('a webhook slower than its timeout fails the delivery', async (t) => {
  const bridge = await startBridge(t, 204, 500);
  await t.rejects(webhookOtpDelivery({ url: bridge.url, timeoutMs: 50 }).send(message), { name: 'TimeoutError' });
});

t.test('a webhook URL that is not http(s) is refused', async (t) => {
  t.throws(() => webhookOtpDelivery({ url: 'file:///etc/passwd' }), /must be http\(s\)/);
});

t.test('the log delivery prints the code', async (t) => {
  const lines: string[] = [];
  await logOtpDelivery((line) => lines.push(line)).send(message);
  t.same(lines, [`[auth-server] one-time code for phone +14155550123 (app ${message.appId}): 012345`]);
});

t.test('a service configured with the webhook delivers codes through it, and answers 502 when it fails', async (t) => {
  const bridge = await startBridge(t);
  const h = await startAuthHarness({ otpDelivery: { kind: 'webhook', url: bridge.url } });
  t.teardown(() => h.close());
  const app = await h.createApp('app-a');
  const reply = await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  t.equal(reply.status, 200);
  const sent = JSON.parse(bridge.received[0]!.body);
  t.match(sent, { channel: 'email', to: 'ann@example.com', code: /^[0-9]{6}$/, app_id: app.id });
  const login = await h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code: sent.code });
  t.equal(login.status, 200);

  const down = await startBridge(t, 503);
  const broken = await startAuthHarness({ otpDelivery: { kind: 'webhook', url: down.url } });
  t.teardown(() => broken.close());
  const other = await broken.createApp('app-a');
  const failed = await broken.post('/auth/otp/request', { ...broken.credentials(other), email: 'ann@example.com' });
  t.equal(failed.status, 502);
  t.same(failed.body, { error: { code: 'OTP_DELIVERY_FAILED', message: 'The code could not be delivered; retry later' } });
  t.match((await broken.loggedLines()).join('\n'), /OTP_DELIVERY_FAILED: .*OTP webhook answered 503/);
});
