// Client ID Metadata Documents (the MCP authorization spec, draft-ietf-oauth-client-id-metadata-document):
// a client_id that is an https URL names a JSON document, served there, describing the client.
// Fetching a URL a stranger chose is a server-side request forgery risk, so the fetch is fenced:
// https only; every address the host resolves to must be public (no loopback, private,
// link-local, multicast or reserved range, IPv4-mapped ones included), and the connection goes
// to the address that was checked (no second lookup to rebind); redirects are refused, not
// followed; the body is capped at MAX_DOCUMENT_BYTES and the whole fetch at a timeout. The
// document's client_id must equal the URL. For development, `allowPrivate` lifts the address
// and https rules (a document served by a local test server).
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import tls from 'node:tls';

export const MAX_DOCUMENT_BYTES = 5 * 1024;
/** A document whose response says nothing about caching is kept this long. */
const DEFAULT_CACHE_MS = 5 * 60 * 1000;
/** And never longer than this, whatever it says. */
const MAX_CACHE_MS = 24 * 3600 * 1000;

export class MetadataDocumentError extends Error {}

const BLOCKED = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32]] as const) {
  BLOCKED.addSubnet(network, prefix, 'ipv6');
}

/** Whether an address may not be fetched from: loopback, private, link-local, multicast, reserved. */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return BLOCKED.check(mapped[1]!, 'ipv4');
  return BLOCKED.check(address, 'ipv6');
}

/** Whether a client_id is shaped like a metadata document URL (https, a path, no fragment or credentials). */
export function isMetadataDocumentUrl(clientId: string, allowPrivate: boolean): boolean {
  if (!clientId.startsWith('https://') && !(allowPrivate && clientId.startsWith('http://'))) return false;
  try {
    const url = new URL(clientId);
    return url.href === clientId && url.hash === '' && url.username === '' && url.password === '' && url.pathname !== '/';
  } catch {
    return false;
  }
}

export interface FetchedDocument {
  document: Record<string, unknown>;
  /** Until when the copy may be used (Cache-Control max-age, capped). */
  expiresAtMs: number;
}

/** Fetches and checks the document; MetadataDocumentError says why it cannot be used. */
export async function fetchMetadataDocument(url: string, options: { allowPrivate: boolean; timeoutMs: number; nowMs: number; caPem?: string }): Promise<FetchedDocument> {
  const target = new URL(url);
  if (target.protocol !== 'https:' && !options.allowPrivate) throw new MetadataDocumentError('the client_id URL must be https');
  const host = target.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true }).catch(() => {
    throw new MetadataDocumentError(`the host ${host} does not resolve`);
  });
  if (addresses.length === 0) throw new MetadataDocumentError(`the host ${host} does not resolve`);
  if (!options.allowPrivate && addresses.some((a) => isBlockedAddress(a.address))) {
    throw new MetadataDocumentError(`the host ${host} is on a loopback, private or reserved address`);
  }
  const { address, family } = addresses[0]!;
  const { status, headers, body } = await get(target, address, family, options.timeoutMs, options.caPem);
  if (status >= 300 && status < 400) throw new MetadataDocumentError('the metadata document URL redirects; redirects are not followed');
  if (status !== 200) throw new MetadataDocumentError(`the metadata document URL answered ${status}`);
  let document: unknown;
  try {
    document = JSON.parse(body.toString('utf8'));
  } catch {
    throw new MetadataDocumentError('the metadata document is not JSON');
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) throw new MetadataDocumentError('the metadata document is not a JSON object');
  const fields = document as Record<string, unknown>;
  if (fields.client_id !== url) throw new MetadataDocumentError('the metadata document names another client_id');
  return { document: fields, expiresAtMs: options.nowMs + cacheLifetimeMs(headers['cache-control']) };
}

/** max-age of Cache-Control, capped; no-store or no-cache: 0 (fetched again next time); none: the default. */
function cacheLifetimeMs(cacheControl: string | string[] | undefined): number {
  const value = Array.isArray(cacheControl) ? cacheControl.join(',') : cacheControl;
  if (!value) return DEFAULT_CACHE_MS;
  if (/(?:^|,)\s*(?:no-store|no-cache)\s*(?:,|$)/i.test(value)) return 0;
  const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d{1,10})"?/i.exec(value);
  return maxAge ? Math.min(Number(maxAge[1]) * 1000, MAX_CACHE_MS) : DEFAULT_CACHE_MS;
}

/** One GET to the checked address (TLS still verifies the host name), bounded in time and size. */
function get(url: URL, address: string, family: number, timeoutMs: number, caPem: string | undefined): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'GET',
      headers: { accept: 'application/json' },
      // The public CAs, and the configured one for a development host.
      ...(caPem ? { ca: [...tls.rootCertificates, caPem] } : {}),
      // The connection goes to the address checked above, not to a second lookup's answer.
      lookup: (_host, lookupOptions, callback) => {
        if ((lookupOptions as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
        else callback(null, address, family);
      },
      signal: AbortSignal.timeout(timeoutMs),
    }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_DOCUMENT_BYTES) {
          // Refused first, then the connection dropped: its own errors then change nothing.
          reject(new MetadataDocumentError(`the metadata document is larger than ${MAX_DOCUMENT_BYTES} bytes`));
          response.destroy();
          request.destroy();
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
      response.on('error', () => reject(new MetadataDocumentError('the metadata document could not be fetched')));
    });
    request.on('error', (error) => {
      if (error instanceof MetadataDocumentError) reject(error);
      else if (error.name === 'AbortError' || error.name === 'TimeoutError') reject(new MetadataDocumentError(`the metadata document did not arrive within ${timeoutMs} ms`));
      else reject(new MetadataDocumentError('the metadata document could not be fetched'));
    });
    request.end();
  });
}
