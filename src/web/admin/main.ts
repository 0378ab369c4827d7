// The admin console: sign in with the admin key (checked with GET /admin/apps), then apps with
// their tenants (invitations, SSO), API keys, webhooks, OAuth clients, sign-in providers, second-factor policy and login code messages, the inference usage, users, signing keys, the audit trail and the rate-limit blocks. Every action is one call of the admin API; a 401 at any
// point signs the console out.
import { AdminError, setAdminKey } from './api.js';
import { clearApiKeys, wireApiKeys } from './api-keys.js';
import { clearApps, loadApps, wireApps } from './apps.js';
import { clearAudit, loadAudit, wireAudit } from './audit.js';
import { byId } from './dom.js';
import { loadKeys, wireKeys } from './keys.js';
import { clearLimits, loadLimits, wireLimits } from './limits.js';
import { clearMessages, wireMessages } from './messages.js';
import { clearClients, wireClients } from './oauth-clients.js';
import { clearInvitations, wireInvitations } from './invitations.js';
import { clearSecondFactor, wireSecondFactor } from './second-factor.js';
import { clearSso, wireSso } from './sso.js';
import { clearUpstream, wireUpstream } from './upstream.js';
import { clearSms, wireSms } from './sms.js';
import { notifyError, UNAUTHORIZED_EVENT } from './notice.js';
import { clearUsage, loadUsage, wireUsage } from './usage.js';
import { clearUsers, wireUsers } from './users.js';
import { clearWebhooks, wireWebhooks } from './webhooks.js';

function showConsole(signedIn: boolean): void {
  byId('sign-in').hidden = signedIn;
  byId('console').hidden = !signedIn;
  byId('nav').hidden = !signedIn;
  byId('sign-out').hidden = !signedIn;
}

function signOut(message?: string): void {
  setAdminKey(null);
  clearApps();
  clearUsers();
  clearWebhooks();
  clearApiKeys();
  clearUsage();
  clearMessages();
  clearClients();
  clearUpstream();
  clearSecondFactor();
  clearInvitations();
  clearSso();
  clearSms();
  clearAudit();
  clearLimits();
  byId('key-list').replaceChildren();
  showConsole(false);
  byId('notice').hidden = true;
  byId('sign-in-error').textContent = message ?? '';
  byId('admin-key').focus();
}

async function signIn(key: string): Promise<void> {
  setAdminKey(key);
  try {
    await loadApps();
  } catch (error) {
    setAdminKey(null);
    byId('sign-in-error').textContent = error instanceof AdminError && error.status === 401
      ? 'The server refused this admin key.'
      : `Cannot sign in: ${(error as Error).message}`;
    return;
  }
  byId<HTMLInputElement>('admin-key').value = '';
  byId('sign-in-error').textContent = '';
  showConsole(true);
  byId('apps-heading').focus();
  try {
    await Promise.all([loadKeys(), loadUsage(), loadAudit(), loadLimits()]);
  } catch (error) {
    notifyError(error);
  }
}

byId<HTMLFormElement>('sign-in-form').addEventListener('submit', (event) => {
  event.preventDefault();
  void signIn(byId<HTMLInputElement>('admin-key').value);
});
byId('sign-out').addEventListener('click', () => signOut());
window.addEventListener(UNAUTHORIZED_EVENT, () => signOut('The admin key was refused; sign in again.'));
wireApps();
wireUsers();
wireKeys();
wireWebhooks();
wireApiKeys();
wireUsage();
wireMessages();
wireClients();
wireUpstream();
wireSecondFactor();
wireInvitations();
wireSso();
wireSms();
wireAudit();
wireLimits();
showConsole(false);
