// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0): GET /oauth/logout with
// id_token_hint, post_logout_redirect_uri, state, client_id. The browser session named by the
// hint's sid (or, without a hint, the browser's sessions) ends, and with it every session
// (refresh family) its codes started; the browser goes back to a registered
// post_logout_redirect_uri, or is shown that it is signed out. A hint this service did not sign,
// or a post_logout_redirect_uri the client did not register, is refused on our page and ends nothing.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { endBrowserSession, findLiveBrowserSessions, lockFamiliesOfBrowserSession } from '../queries/oauth-grants.js';
import { revokeRefreshFamilies } from '../queries/refresh-tokens.js';
import { redirectWith } from './authorization-request.js';
import { presentedBrowser } from './browser.js';
import { findClient } from './clients.js';
import { verifiedIdTokenHint } from './id-token.js';
import { renderErrorPage, renderSignedOutPage } from './sign-in-page.js';

export async function endSession(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const query = req.query;
  const hint = query.get('id_token_hint');
  const refuse = (message: string) => renderErrorPage(400, 'Sign-out request refused', message);
  let claims: Record<string, unknown> | null = null;
  if (hint !== null) {
    claims = await verifiedIdTokenHint(ctx, hint);
    if (!claims) return refuse('The sign-out request carries a token this service did not issue.');
  }
  const clientId = query.get('client_id') ?? (typeof claims?.aud === 'string' ? claims.aud : null);
  if (clientId !== null && claims !== null && claims.aud !== clientId) return refuse('The sign-out request names two different applications.');
  let client: OAuthClientRow | undefined;
  if (clientId !== null) {
    client = await findClient(ctx, clientId);
    if (!client) return refuse('The application asking to sign you out is not registered.');
  }
  const postLogout = query.get('post_logout_redirect_uri');
  if (postLogout !== null && (!client || !client.post_logout_redirect_uris.includes(postLogout))) {
    return refuse('The application asked to return to an address it has not registered; you were not sent there.');
  }
  const sessionIds = new Set<string>();
  if (typeof claims?.sid === 'string') sessionIds.add(claims.sid);
  const browser = presentedBrowser(req);
  if (browser !== null) {
    for (const session of await findLiveBrowserSessions(ctx.sql, browser)) {
      if (!client || session.app_id === client.app_id) sessionIds.add(session.id);
    }
  }
  const origin = requestOrigin(ctx, req);
  const now = new Date(ctx.clock.now());
  for (const id of sessionIds) {
    if (!/^[0-9a-f-]{36}$/.test(id)) continue;
    await ctx.sql.begin(async (tx) => {
      const ended = await endBrowserSession(tx, id, now);
      const families = await lockFamiliesOfBrowserSession(tx, id);
      if (families.length > 0) {
        await revokeRefreshFamilies(tx, { familyIds: families.map((f) => f.id), currentTokenIds: families.map((f) => f.current_token_id), now, reason: 'logout' });
      }
      if (ended || families.length > 0) {
        await insertAuditEvent(tx, {
          type: 'oauth.logout', actor: 'app', appId: client?.app_id ?? null, userId: typeof claims?.sub === 'string' ? claims.sub : null,
          ip: origin.ip, userAgent: origin.userAgent, details: { browser_session_id: id, client_id: client?.id ?? null, sessions_revoked: families.length }, now,
        });
      }
    });
  }
  if (postLogout !== null) return { status: 303, headers: { Location: redirectWith(postLogout, { state: query.get('state') }) }, text: '' };
  return renderSignedOutPage();
}
