// Vertex AI's prediction protocol (AIP_MODE=PREDICTION), as llama-server serves it: POST /predict
// runs each instance as the body of the route its @requestFormat names and answers the routes'
// JSON in {"predictions": [...]}, in order; AIP_HTTP_PORT replaces --port; AIP_HEALTH_ROUTE
// answers as /health.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import t from 'tap';
import type { Route } from '../../src/http/router.js';
import { MAX_INSTANCES, requestFormatOf, vertexRoutes, vertexSettings } from '../../src/inference/vertex-predict.js';
import { startRouterServer } from '../../src/inference/multi-model/server.js';
import { native } from '../../src/native/binding.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { freePort } from '../helpers/ports.js';

const models = await ensureTestModels();
const vertex = { port: 0, healthRoute: '/ping', predictRoute: '/predict' };
const server = await startTestServer(models.chat, { ctxSize: 1024, parallel: 2, vertex });
t.teardown(server.close);
const predict = (body: unknown) => postJson(`${server.base}/predict`, body);

t.test('the settings come from AIP_MODE, AIP_HTTP_PORT, AIP_HEALTH_ROUTE and AIP_PREDICT_ROUTE, with llama-server\'s defaults', async (t) => {
  t.equal(vertexSettings({}), null, 'off without AIP_MODE');
  t.equal(vertexSettings({ AIP_MODE: 'TRAINING' }), null, 'off unless PREDICTION');
  t.same(vertexSettings({ AIP_MODE: 'PREDICTION' }), { port: 8080, healthRoute: '', predictRoute: '/predict' });
  t.same(vertexSettings({ AIP_MODE: 'PREDICTION', AIP_HTTP_PORT: '9001', AIP_HEALTH_ROUTE: 'healthz', AIP_PREDICT_ROUTE: '/v9/predict' }), { port: 9001, healthRoute: '/healthz', predictRoute: '/v9/predict' }, 'a leading slash is added');
  t.throws(() => vertexSettings({ AIP_MODE: 'PREDICTION', AIP_HTTP_PORT: 'eighty' }), /AIP_HTTP_PORT: expected a port number, got "eighty"/);
  t.throws(() => vertexSettings({ AIP_MODE: 'PREDICTION', AIP_HTTP_PORT: '70000' }), /AIP_HTTP_PORT/);
});

t.test('@requestFormat aliases are the route paths in camelCase, without /v1 and path parameters', async (t) => {
  t.same(['/v1/chat/completions', '/apply-template', '/completion', '/v1/messages/count_tokens', '/slots/:id_slot', '/health'].map(requestFormatOf),
    ['chatCompletions', 'applyTemplate', 'completion', 'messagesCountTokens', 'slots', 'health']);
});

t.test('each instance is answered as its route answers it alone, in order, by alias or by path', async (t) => {
  const chat = { max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: 'What is the meaning of life?' }] };
  const alone = await postJson(`${server.base}/v1/chat/completions`, chat);
  const tokens = await postJson(`${server.base}/tokenize`, { content: 'hello world' });
  const res = await predict({ instances: [{ '@requestFormat': 'chatCompletions', ...chat }, { '@requestFormat': '/tokenize', content: 'hello world' }] });
  t.equal(res.status, 200);
  t.same(Object.keys(res.body), ['predictions']);
  t.equal(res.body.predictions.length, 2);
  const [first, second] = res.body.predictions;
  t.equal(first.object, 'chat.completion');
  t.equal(first.choices[0].message.role, 'assistant');
  t.equal(first.choices[0].message.content, alone.body.choices[0].message.content, 'the same greedy answer as the route alone');
  t.same(second, tokens.body);
});

t.test('"stream": true is answered whole; a GET route is reachable by its alias', async (t) => {
  const res = await predict({ instances: [{ '@requestFormat': 'completion', prompt: 'Hello', n_predict: 2, stream: true }, { '@requestFormat': 'health' }] });
  t.equal(res.status, 200);
  t.equal(res.body.predictions[0].tokens_predicted, 2);
  t.equal(typeof res.body.predictions[0].content, 'string');
  t.same(res.body.predictions[1], { status: 'ok' });
});

t.test('a failing instance becomes an error object in its place; the others are answered', async (t) => {
  const direct = await postJson(`${server.base}/v1/chat/completions`, { max_tokens: 2 });
  const res = await predict({ instances: [
    { '@requestFormat': 'chatCompletions', max_tokens: 2 },
    { '@requestFormat': 'nothingHere' },
    { content: 'no format' },
    'not an object',
    { '@requestFormat': 'tokenize', content: 'ok' },
  ] });
  t.equal(res.status, 200);
  const [invalid, unknown, noFormat, notObject, fine] = res.body.predictions;
  t.same(invalid, direct.body, 'the route\'s own error answer');
  t.same(unknown, { error: { code: 400, message: 'no handler registered for @requestFormat: nothingHere', type: 'invalid_request_error' } });
  t.same(noFormat, { error: { code: 400, message: 'each instance must include a string @requestFormat', type: 'invalid_request_error' } });
  t.same(notObject, { error: { code: 400, message: 'each instance must be a JSON object', type: 'invalid_request_error' } });
  t.ok(Array.isArray(fine.tokens));
});

t.test('a body that is not an object with an instances array of at most 128 is a 400', async (t) => {
  const cases: Array<[unknown, string]> = [
    ['{not json', 'Invalid JSON body'],
    [[1, 2], 'request body must be a JSON object'],
    [{ instance: [] }, 'request body must include an array field named instances'],
    [{ instances: {} }, 'request body must include an array field named instances'],
    [{ instances: Array.from({ length: MAX_INSTANCES + 1 }, () => ({ '@requestFormat': 'health' })) }, 'instances array exceeds maximum size of 128'],
  ];
  for (const [body, message] of cases) {
    const res = await predict(body);
    t.equal(res.status, 400, message);
    t.equal(res.body.error.type, 'invalid_request_error');
    t.match(res.body.error.message, message);
  }
  const empty = await predict({ instances: [] });
  t.same([empty.status, empty.body], [200, { predictions: [] }]);
});

t.test('AIP_HEALTH_ROUTE answers as /health', async (t) => {
  const ping = await fetch(`${server.base}/ping`);
  t.equal(ping.status, 200);
  t.same(await ping.json(), await (await fetch(`${server.base}/health`)).json());
});

t.test('with --api-key the predict route needs the key, and its instances run with it', async (t) => {
  const keyed = await startTestServer(models.chat, { ctxSize: 256, parallel: 1, apiKeys: ['sekret'], vertex });
  t.teardown(keyed.close);
  const body = { instances: [{ '@requestFormat': 'tokenize', content: 'hi' }] };
  const refused = await postJson(`${keyed.base}/predict`, body);
  t.equal(refused.status, 401);
  const allowed = await postJson(`${keyed.base}/predict`, body, { authorization: 'Bearer sekret' });
  t.equal(allowed.status, 200);
  t.ok(Array.isArray(allowed.body.predictions[0].tokens));
});

t.test('a predict route that is already a route refuses to start, as llama-server', async (t) => {
  const routes: Route[] = [{ method: 'GET', path: '/health', handler: () => ({ body: {} }) }];
  t.throws(() => vertexRoutes(routes, { port: 0, healthRoute: '', predictRoute: '/health' }, '', (method, path, handler) => ({ method, path, handler })), /AIP_PREDICT_ROUTE=\/health conflicts with an existing route/);
});


t.test('inference-server with AIP_MODE=PREDICTION listens on AIP_HTTP_PORT in place of --port', async (t) => {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts'),
    '-m', models.chat, '-c', '256', '--port', '0', '--no-ui'], { cwd: REPO_ROOT, env: { ...process.env, AIP_MODE: 'PREDICTION', AIP_HTTP_PORT: String(port) } });
  t.teardown(() => child.kill('SIGKILL'));
  let stderr = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d) => {
      stderr += d;
      if (/model ready/.test(stderr)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  await ready;
  t.match(stderr, `listening on AIP_HTTP_PORT ${port} in place of port 0`);
  const res = await postJson(`http://127.0.0.1:${port}/predict`, { instances: [{ '@requestFormat': 'tokenize', content: 'hi' }] });
  t.equal(res.status, 200);
  t.ok(Array.isArray(res.body.predictions[0].tokens));
});

t.test('router mode: the router serves the protocol, and its model processes ignore AIP_*', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'vertex-router-'));
  const preset = join(dir, 'preset.ini');
  writeFileSync(preset, `[chat]\nmodel = ${models.chat}\n`);
  const params = native.ServerParams.parse(['llama-server', '--models-preset', preset, '-c', '512', '-np', '1', '-t', '1']);
  const router = await startRouterServer({
    host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
    readSpecs: () => params.routerModels(), childArgs: [], log: () => {}, vertex,
    command: [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')],
  });
  t.teardown(() => router.close());
  // A model process that took AIP_HTTP_PORT would try the router's own port, fail, and the instance with it.
  const saved = { mode: process.env['AIP_MODE'], port: process.env['AIP_HTTP_PORT'] };
  process.env['AIP_MODE'] = 'PREDICTION';
  process.env['AIP_HTTP_PORT'] = String(router.port);
  t.teardown(() => {
    for (const [key, value] of [['AIP_MODE', saved.mode], ['AIP_HTTP_PORT', saved.port]] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });
  const res = await postJson(`http://127.0.0.1:${router.port}/predict`, { instances: [
    { '@requestFormat': 'chatCompletions', model: 'chat', max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] },
    { '@requestFormat': 'models' },
  ] });
  t.equal(res.status, 200);
  const [chat, list] = res.body.predictions;
  t.equal(chat.object, 'chat.completion', JSON.stringify(chat));
  t.equal(chat.model, 'chat');
  t.ok(list.data.some((m: { id: string }) => m.id === 'chat'), 'GET /models through its alias');
});
