// Proof that a tenant controls an e-mail domain: a DNS TXT record `_auth-verify.<domain>` whose
// value is `auth-verify=<the domain's token>`, looked up through the system's resolvers or the
// configured ones (AUTH_DNS_SERVERS, `dnsServers`: tests run a DNS server on 127.0.0.1).
import { Resolver } from 'node:dns/promises';

export const PROOF_RECORD_PREFIX = '_auth-verify.';
export const PROOF_VALUE_PREFIX = 'auth-verify=';

export interface DomainProofLookup {
  /** The TXT strings at the name (each record's chunks joined); [] when there are none. Throws `unavailable` errors. */
  txt(name: string): Promise<string[]>;
}

/** A lookup failure that is the resolver's (timeout, refused, server failure), not the absence of a record. */
export class DnsUnavailable extends Error {}

/** `servers`: `host` or `host:port` entries; absent or empty: the system's resolvers. */
export function dnsProofLookup(servers: readonly string[] | undefined, timeoutMs = 3000): DomainProofLookup {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  if (servers && servers.length > 0) resolver.setServers([...servers]);
  return {
    async txt(name) {
      try {
        return (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''));
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENODATA' || code === 'ENOTFOUND') return [];
        throw new DnsUnavailable(`TXT ${name}: ${code ?? String(error)}`, { cause: error });
      }
    },
  };
}
