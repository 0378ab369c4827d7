// auth-server traced: its worker threads trace their routes with the same HTTP hook as
// inference-server (SERVER spans named by the route's template, the auth error code as
// error.type), and export what is left when the server shuts down: the batch delay here is longer
// than the test, so every span below arrives through the shutdown's flush.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { OtlpReceiver } from './otlp-receiver.js';

const ADMIN_KEY = 'auth-traces-admin-key-0123';
const receiver = await OtlpReceiver.start();
const root = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-traces-'));
await fs.chmod(root, 0o711);
t.teardown(async () => {
  await receiver.close();
  await fs.rm(root, { recursive: true, force: true });
});

const env: NodeJS.ProcessEnv = {
  ...process.env,
  AUTH_ADMIN_KEY: ADMIN_KEY,
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '600000',
};
delete env['DATABASE_URL'];
delete env['NODE_ENV'];
delete env['OTEL_SERVICE_NAME'];
const child = spawn(process.execPath, ['--import', './scripts/ts-loader.mjs', 'src/auth/server-main.ts', '--port', '0', '--data-dir', path.join(root, 'data'), '--workers', '1'], { env });
let stderr = '';
child.stderr.on('data', (chunk) => { stderr += chunk; });
const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
const base = await new Promise<string>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`auth-server did not start: ${stderr}`)), 90_000);
  child.stderr.on('data', () => {
    const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stderr);
    if (match) { clearTimeout(timer); resolve(match[1]!); }
  });
  child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`auth-server exited with ${code}: ${stderr}`)); });
});

t.test("auth-server's routes are SERVER spans named by their template, exported at shutdown", async (t) => {
  const jwks = await fetch(`${base}/.well-known/jwks.json`, { headers: { traceparent: '00-6bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } });
  t.equal(jwks.status, 200);
  const refused = await fetch(`${base}/admin/apps/some-app`, { headers: { 'x-admin-key': 'not-the-admin-key' } });
  const body = await refused.json() as { error: { code: string } };
  t.equal(refused.status, 401);
  t.equal(body.error.code, 'ADMIN_KEY_INVALID');

  child.kill('SIGTERM');
  t.equal(await exited, 0);
  const served = receiver.spans.find((s) => s.name === 'GET /.well-known/jwks.json');
  const rejected = receiver.spans.find((s) => s.name === 'GET /admin/apps/:app_id');
  t.ok(served && rejected, 'both spans were exported before the process ended');
  t.equal(served!.resource['service.name'], 'auth-server', 'the default service name');
  t.equal(served!.kind, 2, 'SERVER');
  t.equal(served!.traceId, '6bf92f3577b34da6a3ce929d0e0e4736', "the client's trace is continued");
  t.equal(served!.parentSpanId, '00f067aa0ba902b7');
  t.same(served!.attributes, { 'http.request.method': 'GET', 'http.route': '/.well-known/jwks.json', 'http.response.status_code': 200 });
  t.same(rejected!.attributes, {
    'http.request.method': 'GET',
    'http.route': '/admin/apps/:app_id',
    'http.response.status_code': 401,
    'error.type': body.error.code,
  });
  t.equal(rejected!.statusCode, 0, 'a 4xx leaves the span status unset');
});
