// Users: look up by id, e-mail or phone; soft-delete, restore, revoke sessions, reset the second
// factor (audited); the live sessions, each of which can be ended; the OAuth consents, each of
// which can be revoked (which ends that client's sessions of the user).
import { adminApi, type Consent, type Session, type User } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { notify, notifyError } from './notice.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function find(query: string): Promise<User[]> {
  if (UUID.test(query)) {
    try {
      return [await adminApi.getUser(query)];
    } catch (error) {
      if ((error as { code?: string }).code === 'USER_NOT_FOUND') return [];
      throw error;
    }
  }
  return adminApi.findUsers(query.includes('@') ? 'email' : 'phone', query);
}

function show(users: User[], query: string): void {
  byId('user-result').replaceChildren(users.length === 0 ? el('p', { class: 'empty' }, `No user matches “${query}”.`) : userCard(users[0]!));
  if (users.length > 0) {
    void showSessions(users[0]!);
    void showConsents(users[0]!);
  }
}

/** The user's live sessions in every app, under the card; each can be ended. */
async function showSessions(user: User): Promise<void> {
  let sessions: Session[];
  try {
    sessions = await adminApi.listSessions(user.id);
  } catch (error) {
    notifyError(error);
    return;
  }
  const card = document.querySelector(`article.user[data-user-id="${user.id}"]`);
  if (!card) return; // another search replaced it meanwhile
  const who = user.email ?? user.phone ?? user.id;
  const section = el('section', { class: 'sessions', 'aria-label': `Sessions of ${who}` },
    el('h3', {}, `Live sessions (${sessions.length})`),
    sessions.length === 0 ? el('p', { class: 'empty' }, 'None.') : el('ul', {}, ...sessions.map((session) => el('li', { 'data-session-id': session.id },
      facts([['App', session.app_slug], ['Started', when(session.created_at)], ['Last used', when(session.last_used_at)], ['IP', session.ip], ['Client', session.user_agent]]),
      button('End session', () => void endSession(user, session), { 'aria-label': `End the ${session.app_slug} session started ${when(session.created_at)}` })))));
  const old = card.querySelector('.sessions');
  const consents = card.querySelector('.consents');
  if (old) old.replaceWith(section);
  else if (consents) consents.before(section);
  else card.append(section);
}

/** The OAuth clients the user consented to (every app), under the sessions; each consent can be revoked. */
async function showConsents(user: User): Promise<void> {
  let consents: Consent[];
  try {
    consents = await adminApi.listConsents(user.id);
  } catch (error) {
    notifyError(error);
    return;
  }
  const card = document.querySelector(`article.user[data-user-id="${user.id}"]`);
  if (!card) return;
  const who = user.email ?? user.phone ?? user.id;
  const section = el('section', { class: 'consents', 'aria-label': `OAuth consents of ${who}` },
    el('h3', {}, `OAuth consents (${consents.length})`),
    consents.length === 0 ? el('p', { class: 'empty' }, 'None.') : el('ul', {}, ...consents.map((consent) => el('li', { 'data-consent-client-id': consent.client_id },
      facts([['Client', consent.client_name], ['Client id', el('code', {}, consent.client_id)], ['Scopes', consent.scopes.join(' ')], ['Granted', when(consent.granted_at)]]),
      button('Revoke consent', () => void revokeConsent(user, consent), { 'aria-label': `Revoke the consent to ${consent.client_name}` })))));
  const old = card.querySelector('.consents');
  if (old) old.replaceWith(section);
  else card.append(section);
}

async function revokeConsent(user: User, consent: Consent): Promise<void> {
  if (!confirm(`Revoke the consent to ${consent.client_name}? The client's sessions of this user end; it must ask again.`)) return;
  try {
    const result = await adminApi.revokeConsent(user.id, consent.client_id);
    notify(`Revoked the consent to ${consent.client_name}; ${result.sessions_revoked} session(s) ended.`);
    await Promise.all([showConsents(user), showSessions(user)]);
  } catch (error) {
    notifyError(error);
  }
}

async function resetSecondFactor(user: User): Promise<void> {
  const who = user.email ?? user.phone ?? user.id;
  if (!confirm(`Reset the second factor of ${who}? Their authenticator app and recovery codes stop working; they enroll again. The reset is recorded in the audit trail.`)) return;
  try {
    const result = await adminApi.resetSecondFactor(user.id);
    notify(result.reset ? `Reset the second factor of ${who}.` : `${who} had no second factor to reset.`);
  } catch (error) {
    notifyError(error);
  }
}

async function endSession(user: User, session: Session): Promise<void> {
  if (!confirm(`End this ${session.app_slug} session? Its refresh token stops working.`)) return;
  try {
    await adminApi.endSession(user.id, session.id);
    notify(`Ended the ${session.app_slug} session.`);
    await showSessions(user);
  } catch (error) {
    notifyError(error);
  }
}

function userCard(user: User): HTMLElement {
  const deleted = user.deleted_at !== null;
  const who = user.email ?? user.phone ?? user.id;
  return el('article', { class: 'user', 'data-user-id': user.id, 'aria-label': `User ${who}` },
    el('div', { class: 'item-head' }, el('strong', {}, who), el('span', { class: deleted ? 'tag danger' : 'tag ok' }, deleted ? 'deleted' : 'active')),
    facts([['Id', el('code', {}, user.id)], ['E-mail', user.email], ['Phone', user.phone], ['Created', when(user.created_at)], ['Deleted', when(user.deleted_at)]]),
    el('div', { class: 'row' },
      deleted
        ? button('Restore', () => void act(user, 'restore'))
        : button('Soft-delete', () => void act(user, 'delete'), { class: 'danger' }),
      button('Revoke sessions', () => void act(user, 'revoke')),
      button('Reset second factor', () => void resetSecondFactor(user), { 'aria-label': `Reset the second factor of ${who}` })));
}

async function act(user: User, action: 'delete' | 'restore' | 'revoke'): Promise<void> {
  const who = user.email ?? user.phone ?? user.id;
  const question = action === 'delete'
    ? `Soft-delete ${who}? Every session is revoked and logins are refused until restored.`
    : action === 'revoke' ? `Revoke every session of ${who}? The user must log in again.` : null;
  if (question && !confirm(question)) return;
  try {
    if (action === 'delete') {
      const result = await adminApi.deleteUser(user.id);
      notify(`Deleted ${who}; ${result.sessions_revoked} session(s) revoked.`);
    } else if (action === 'restore') {
      await adminApi.restoreUser(user.id);
      notify(`Restored ${who}.`);
    } else {
      const result = await adminApi.revokeSessions(user.id);
      notify(`Revoked ${result.sessions_revoked} session(s) of ${who}.`);
    }
    show([await adminApi.getUser(user.id)], who);
  } catch (error) {
    notifyError(error);
  }
}

export function wireUsers(): void {
  byId<HTMLFormElement>('find-user').addEventListener('submit', async (event) => {
    event.preventDefault();
    const query = byId<HTMLInputElement>('user-query').value.trim();
    try {
      show(await find(query), query);
    } catch (error) {
      notifyError(error);
    }
  });
}

export function clearUsers(): void {
  byId('user-result').replaceChildren();
  byId<HTMLInputElement>('user-query').value = '';
}
