// The chat page at GET / (where llama-server serves its web UI; --no-webui turns it off). Its
// files are built by `npm run build:web` into dist/web/chat and answered from memory. The page
// is public, as llama-server's: every API call it makes carries the API key when one is set.
import type { Route } from '../http/router.js';
import { builtPageDir, staticPageRoutes } from '../http/static-files.js';

/** Scripts and styles from this server only (no inline code), images also from data: URLs (attachments), no framing. */
export const CHAT_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

/** GET / and /webui/<file> (under --api-prefix, as llama-server); throws at start when the page was not built. */
export function chatPageRoutes(apiPrefix = ''): Route[] {
  return staticPageRoutes({ dir: builtPageDir('chat'), indexPath: `${apiPrefix}/`, assetPrefix: `${apiPrefix}/webui/`, headers: { ...CHAT_PAGE_HEADERS } });
}
