// The Model Context Protocol's authorization, driven by the MCP SDK's own client
// (@modelcontextprotocol/sdk): an MCP server from the SDK whose bearer check trusts this issuer
// is reached from its bare URL; the client finds the issuer through protected-resource metadata
// (RFC 9728), registers (RFC 7591) or names itself by a metadata document URL, runs the code
// flow with PKCE and a resource indicator (RFC 8707), calls a tool, and refreshes.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { startAuthHarness, type TestApp } from '../fixtures/harness.js';
import { harnessFetch, OAuthBrowser } from '../fixtures/oauth-browser.js';
import { MemoryProvider } from '../fixtures/mcp-client-provider.js';

// A certificate for 127.0.0.1, for the https server of the client's metadata document.
const tlsDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-cimd-tls-'));
t.teardown(() => fs.rm(tlsDir, { recursive: true, force: true }));
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
  '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(tlsDir, 'key.pem'), '-out', path.join(tlsDir, 'cert.pem')], { stdio: 'ignore' });
const cert = await fs.readFile(path.join(tlsDir, 'cert.pem'), 'utf8');
const key = await fs.readFile(path.join(tlsDir, 'key.pem'), 'utf8');

const h = await startAuthHarness({
  oauthOpenClients: { appSlug: 'app-a', registration: true, metadataDocuments: true, allowPrivateMetadataHosts: true, metadataCaPem: cert },
});
t.teardown(() => h.close());

// The SDK MCP server: one tool, behind the SDK's bearer check, which verifies our tokens with
// our JWKS and wants its own resource as audience.
const mcp = express();
mcp.use(express.json());
let mcpUrl = '';
const jwks = createRemoteJWKSet(new URL(`${h.base}/.well-known/jwks.json`));
mcp.get('/.well-known/oauth-protected-resource/mcp', (_req, res) => {
  res.json({ resource: mcpUrl, authorization_servers: [h.issuer], bearer_methods_supported: ['header'] });
});
mcp.post('/mcp', (req, res, next) => requireBearerAuth({
  resourceMetadataUrl: `${new URL(mcpUrl).origin}/.well-known/oauth-protected-resource/mcp`,
  verifier: {
    verifyAccessToken: async (token) => {
      const { payload } = await jwtVerify(token, jwks, { issuer: h.issuer, audience: mcpUrl, currentDate: new Date(h.clock.now()) });
      return { token, clientId: String(payload.client_id), scopes: String(payload.scope ?? '').split(' '), expiresAt: payload.exp, resource: new URL(mcpUrl), extra: { sub: payload.sub } };
    },
  },
})(req, res, next), async (req, res) => {
  const server = new McpServer({ name: 'test-mcp', version: '1.0.0' });
  server.registerTool('whoami', { description: 'the caller' }, async (extra) => ({
    content: [{ type: 'text', text: String(extra.authInfo?.extra?.sub) }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => { void transport.close(); void server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
const mcpServer = mcp.listen(0, '127.0.0.1');
await new Promise((resolve) => mcpServer.once('listening', resolve));
mcpUrl = `http://127.0.0.1:${(mcpServer.address() as AddressInfo).port}/mcp`;
t.teardown(() => new Promise((resolve) => mcpServer.close(resolve)));

// The client's metadata document, on https.
const documentServer = https.createServer({ cert, key }, (req, res) => {
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'max-age=60');
  res.end(JSON.stringify({
    client_id: documentUrl, client_name: 'Agent by URL', redirect_uris: ['http://127.0.0.1:33418/callback'],
    grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none',
  }));
  documentFetches++;
});
let documentFetches = 0;
documentServer.listen(0, '127.0.0.1');
await new Promise((resolve) => documentServer.once('listening', resolve));
const documentUrl = `https://127.0.0.1:${(documentServer.address() as AddressInfo).port}/client.json`;
t.teardown(() => new Promise((resolve) => documentServer.close(resolve)));

let app: TestApp;
t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  const set = await h.admin('PUT', `/admin/apps/${app.id}/oauth-resources`, { resources: [mcpUrl] });
  if (set.status !== 200) throw new Error(`resources: ${set.status} ${JSON.stringify(set.body)}`);
  documentFetches = 0;
});

/** The SDK client connects from the bare URL: 401, discovery, registration, then the browser signs in; returns the code. */
async function connectUnauthorized(provider: MemoryProvider): Promise<string> {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: harnessFetch(h) });
  const client = new Client({ name: 'agent', version: '1.0.0' });
  const refused = await client.connect(transport).catch((error: unknown) => error);
  if (!(refused instanceof UnauthorizedError)) throw new Error(`expected UnauthorizedError, got ${String(refused)}`);
  if (!provider.authorizationUrl) throw new Error('the SDK did not start the authorization');
  const browser = new OAuthBrowser(h);
  const page = await browser.get(provider.authorizationUrl);
  if (page.status !== 200) throw new Error(`authorize: ${page.status} ${page.location}\n${page.html}`);
  const signedIn = await browser.signInWithCode(page.html, 'ann@example.com');
  // A client that registered itself is third-party: the user allows it once.
  const back = await browser.decide(signedIn.html, 'allow');
  if (back.status !== 303) throw new Error(`sign-in: ${back.status}\n${back.html}`);
  const code = new URL(back.location!).searchParams.get('code');
  if (!code) throw new Error(`no code: ${back.location}`);
  await transport.finishAuth(code);
  return code;
}

async function callWhoami(provider: MemoryProvider): Promise<string> {
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: harnessFetch(h) }));
  const result = await client.callTool({ name: 'whoami', arguments: {} });
  await client.close();
  return (result.content as { text: string }[])[0]!.text;
}

t.test('an MCP client registers itself (RFC 7591), gets a token for the MCP server\'s resource, calls a tool and refreshes', async (t) => {
  const provider = new MemoryProvider('Test agent');
  await connectUnauthorized(provider);
  t.match(provider.information, { client_id: /^[0-9a-f-]{36}$/ }, 'registered, a public client');
  t.equal(provider.authorizationUrl!.searchParams.get('resource'), mcpUrl, 'the resource indicator is the MCP server');
  t.equal(provider.authorizationUrl!.searchParams.get('code_challenge_method'), 'S256');
  const [user] = await h.sql<{ id: string }[]>`select id from users where email = 'ann@example.com'`;
  t.equal(await callWhoami(provider), user!.id, 'the tool sees the signed-in user');
  const payload = JSON.parse(Buffer.from(provider.saved!.access_token.split('.')[1]!, 'base64url').toString());
  t.match(payload, { aud: mcpUrl, app_id: 'app-a', client_id: provider.information!.client_id, sub: user!.id });
  t.equal((await h.me(provider.saved!.access_token)).status, 401, 'a token for the MCP server is refused elsewhere (here by /auth/me)');

  const firstRefresh = provider.saved!.refresh_token;
  t.type(firstRefresh, 'string');
  const result = await auth(provider, { serverUrl: mcpUrl, fetchFn: harnessFetch(h) });
  t.equal(result, 'AUTHORIZED');
  t.not(provider.saved!.refresh_token, firstRefresh, 'the refresh rotated');
  const refreshed = JSON.parse(Buffer.from(provider.saved!.access_token.split('.')[1]!, 'base64url').toString());
  t.equal(refreshed.aud, mcpUrl, 'the refreshed token keeps its audience');
  t.equal(await callWhoami(provider), user!.id);
  const registered = await h.sql`select origin from oauth_clients where origin = 'dynamic'`;
  t.equal(registered.length, 1);
});

t.test('an MCP client named by its metadata document URL needs no registration', async (t) => {
  const provider = new MemoryProvider('Test agent', documentUrl);
  await connectUnauthorized(provider);
  t.equal(provider.information!.client_id, documentUrl);
  t.equal(provider.authorizationUrl!.searchParams.get('client_id'), documentUrl);
  const [user] = await h.sql<{ id: string }[]>`select id from users where email = 'ann@example.com'`;
  t.equal(await callWhoami(provider), user!.id);
  const payload = JSON.parse(Buffer.from(provider.saved!.access_token.split('.')[1]!, 'base64url').toString());
  t.equal(payload.client_id, documentUrl);
  t.equal(documentFetches, 1, 'fetched once, then served from the copy its Cache-Control allows');
  t.same((await h.sql`select origin, name from oauth_clients`).map((r) => ({ ...r })), [{ origin: 'metadata_document', name: 'Agent by URL' }]);
});
