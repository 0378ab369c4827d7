// The admin console page at GET /admin/ (served only with AUTH_ADMIN_CONSOLE=1). Its files are
// built by `npm run build:web` into dist/web/admin and answered from memory. The page holds no
// power of its own: it calls the admin routes with the X-Admin-Key its user types in.
import type { Route } from '../http/router.js';
import { builtPageDir, staticPageRoutes } from '../http/static-files.js';

/** Scripts and styles from this server only, no inline code, no framing, nothing sent elsewhere. */
export const ADMIN_CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** GET /admin/ and /admin/console/<file>, and /admin redirecting to /admin/. Throws at start when the page was not built. */
export function adminConsoleRoutes(): Route[] {
  return [
    { method: 'GET', path: '/admin', handler: () => ({ status: 308, headers: { Location: '/admin/' } }) },
    ...staticPageRoutes({ dir: builtPageDir('admin'), indexPath: '/admin/', assetPrefix: '/admin/console/', headers: { ...ADMIN_CONSOLE_HEADERS } }),
  ];
}
