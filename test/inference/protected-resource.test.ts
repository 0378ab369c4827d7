// inference-server --auth-app as an OAuth protected resource (RFC 9728): reached from its bare
// URL by the MCP SDK's client auth, which reads the 401's resource_metadata, finds the issuer,
// registers (RFC 7591), signs in with PKCE and a resource indicator (RFC 8707), and refreshes;
// the token, whose audience is the server's resource, is admitted as the app's own are. In router
// mode the router is the resource: its 401 names the metadata, and a token for it reaches a model
// process.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { createInferenceAuth, type InferenceAuth } from '../../src/inference/access/auth-bridge.js';
import { startRouterServer } from '../../src/inference/multi-model/server.js';
import { native } from '../../src/native/binding.js';
import { startAuthHarness, type AuthHarness } from '../auth/fixtures/harness.js';
import { harnessFetch, OAuthBrowser } from '../auth/fixtures/oauth-browser.js';
import { MemoryProvider } from '../auth/fixtures/mcp-client-provider.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { freePort } from '../helpers/ports.js';

const models = await ensureTestModels();
const prompt = { prompt: 'Hello', n_predict: 2 };

/**
 * A request without a token to the server at `base` is refused with a 401 whose challenge names the
 * server's metadata document, and that document names the server and our issuer; the challenge.
 */
async function refusedWithChallenge(t: Tap.Test, base: string, path: string, body: unknown): Promise<string> {
  const refused = await postJson(`${base}${path}`, body);
  t.equal(refused.status, 401);
  const challenge = refused.headers.get('www-authenticate');
  t.equal(challenge, `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource"`);
  const metadata = await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json();
  t.same(metadata, { resource: `${base}/`, authorization_servers: ['http://auth.test'], bearer_methods_supported: ['header'], resource_name: 'inference-server' });
  return challenge!;
}



/** A free port for an inference server of the app "chat", its base URL, and that app's bridge to harness `h` (closed with `t`). */
async function chatResource(t: Tap.Test, h: AuthHarness): Promise<{ port: number; base: string; bridge: InferenceAuth }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const bridge = await createInferenceAuth({ mount: false, appSlug: 'chat', issuer: h.issuer, jwksUrl: `${h.base}/.well-known/jwks.json`, selfUrl: base, env: {} });
  t.teardown(() => bridge.close());
  return { port, base, bridge };
}

t.test('an OAuth client gets a token for inference-server by itself, from the 401 to a completion', async (t) => {
  const h = await startAuthHarness({ oauthOpenClients: { appSlug: 'chat', registration: true, metadataDocuments: false } });
  t.teardown(() => h.close());
  const app = await h.createApp('chat');
  const { port, base, bridge } = await chatResource(t, h);
  const inference = await startTestServer(models.chat, { port, parallel: 1, ctxSize: 512, extraRoutes: bridge.routes, acceptBearer: bridge.acceptBearer });
  t.teardown(inference.close);
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/oauth-resources`, { resources: [`${base}/`] })).status, 200);

  const challenge = await refusedWithChallenge(t, base, '/completion', prompt);

  const provider = new MemoryProvider('Agent');
  const resourceMetadataUrl = new URL(/resource_metadata="([^"]+)"/.exec(challenge!)![1]!);
  t.equal(await auth(provider, { serverUrl: base, resourceMetadataUrl, fetchFn: harnessFetch(h) }), 'REDIRECT');
  t.equal(provider.authorizationUrl!.searchParams.get('resource'), `${base}/`);
  const browser = new OAuthBrowser(h);
  const page = await browser.get(provider.authorizationUrl!);
  t.equal(page.status, 200);
  const signedIn = await browser.signInWithCode(page.html, 'ann@example.com');
  // A client that registered itself is third-party: the user allows it once.
  const back = await browser.decide(signedIn.html, 'allow');
  t.equal(back.status, 303);
  const code = new URL(back.location!).searchParams.get('code')!;
  t.equal(await auth(provider, { serverUrl: base, resourceMetadataUrl, authorizationCode: code, fetchFn: harnessFetch(h) }), 'AUTHORIZED');
  const payload = JSON.parse(Buffer.from(provider.saved!.access_token.split('.')[1]!, 'base64url').toString());
  t.equal(payload.aud, `${base}/`, 'the token is for this server');
  const ok = await postJson(`${base}/completion`, prompt, { authorization: `Bearer ${provider.saved!.access_token}` });
  t.equal(ok.status, 200, 'and admitted as an access token of the app');
  t.equal(ok.body.tokens_predicted, 2);

  const before = provider.saved!.refresh_token;
  t.equal(await auth(provider, { serverUrl: base, resourceMetadataUrl, fetchFn: harnessFetch(h) }), 'AUTHORIZED');
  t.not(provider.saved!.refresh_token, before, 'refreshed through the session family');
  t.equal((await postJson(`${base}/completion`, prompt, { authorization: `Bearer ${provider.saved!.access_token}` })).status, 200);

  // A token of the same app for another resource is refused here.
  await h.admin('PUT', `/admin/apps/${app.id}/oauth-resources`, { resources: [`${base}/`, 'https://other.example/'] });
  const backend = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Backend', grant_types: ['client_credentials'], scopes: ['jobs'] });
  const other = await h.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'client_credentials', resource: 'https://other.example/', client_id: backend.body.client_id, client_secret: backend.body.client_secret }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(other.status, 200);
  const elsewhere = await postJson(`${base}/completion`, prompt, { authorization: `Bearer ${other.body.access_token}` });
  t.equal(elsewhere.status, 401, 'a token for another resource');
  t.equal(elsewhere.headers.get('www-authenticate'), challenge);
});

t.test('in router mode the router is the protected resource: its 401 names the metadata, a token for it reaches a model process', async (t) => {
  const h = await startAuthHarness();
  t.teardown(() => h.close());
  const app = await h.createApp('chat');
  const { port, base, bridge } = await chatResource(t, h);
  const dir = mkdtempSync(join(tmpdir(), 'protected-router-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(models.chat, join(dir, 'chat.gguf'));
  const params = native.ServerParams.parse(['llama-server', '--models-dir', dir, '-c', '512', '-np', '1', '-t', '1']);
  const router = await startRouterServer({
    host: '127.0.0.1', port, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
    readSpecs: () => params.routerModels(), childArgs: [], log: () => {},
    command: [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')],
    extraRoutes: bridge.routes, acceptBearer: bridge.acceptBearer,
  });
  t.teardown(() => router.close());
  const chat = { model: 'chat', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 };

  const challenge = await refusedWithChallenge(t, base, '/v1/chat/completions', chat);

  await h.admin('PUT', `/admin/apps/${app.id}/oauth-resources`, { resources: [`${base}/`, 'https://other.example/'] });
  const backend = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Backend', grant_types: ['client_credentials'], scopes: ['jobs'] });
  const tokenFor = async (resource: string): Promise<string> => {
    const issued = await h.request('POST', '/oauth/token', {
      raw: new URLSearchParams({ grant_type: 'client_credentials', resource, client_id: backend.body.client_id, client_secret: backend.body.client_secret }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    t.equal(issued.status, 200, `a token for ${resource}`);
    return issued.body.access_token as string;
  };
  const ok = await postJson(`${base}/v1/chat/completions`, chat, { authorization: `Bearer ${await tokenFor(`${base}/`)}` });
  t.equal(ok.status, 200, 'a token for the router is admitted, and a model process answers');
  t.equal(ok.body.model, 'chat');
  t.equal(ok.body.usage.completion_tokens, 2);
  const elsewhere = await postJson(`${base}/v1/chat/completions`, chat, { authorization: `Bearer ${await tokenFor('https://other.example/')}` });
  t.equal(elsewhere.status, 401, 'a token for another resource is refused by the router');
  t.equal(elsewhere.headers.get('www-authenticate'), challenge);
});
