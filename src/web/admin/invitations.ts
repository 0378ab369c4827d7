// The invitations of the selected tenant: invite an e-mail address or phone number with a role
// (the invitation goes out by the app's e-mail or SMS), the list by state, resend and revoke a
// pending one. Accepting is the invited person's: signing in as that address by any method.
import { adminApi, type App, type Invitation, type Tenant } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { clearFormErrors, showFormError } from './form-errors.js';
import { notify, notifyError } from './notice.js';

let selected: { app: App; tenant: Tenant } | null = null;
const FIELDS: Record<string, string> = { email: 'invite-to', phone: 'invite-to', role: 'invite-role', INVITATION_PENDING: 'invite-to' };

export async function selectInvitationsTenant(app: App, tenant: Tenant): Promise<void> {
  selected = { app, tenant };
  byId('invitations-heading').textContent = `Invitations to ${tenant.name} (${app.slug})`;
  byId('invitations').hidden = false;
  byId<HTMLFormElement>('invite-form').reset();
  clearFormErrors(byId<HTMLFormElement>('invite-form'));
  try {
    await loadInvitations();
  } catch (error) {
    notifyError(error);
  }
  byId('invitations-heading').focus();
}

async function loadInvitations(): Promise<void> {
  if (!selected) return;
  const invitations = await adminApi.listInvitations(selected.app.id, selected.tenant.id, byId<HTMLSelectElement>('invitation-state').value);
  byId('invitation-list').replaceChildren(...(invitations.length ? invitations.map(invitationItem) : [el('li', { class: 'empty' }, 'No invitations.')]));
}

const STATE_TAG: Record<string, string> = { pending: '', accepted: 'ok', revoked: 'danger', expired: 'danger' };

function invitationItem(invitation: Invitation): HTMLLIElement {
  const to = invitation.email ?? invitation.phone ?? '';
  return el('li', { 'data-invitation-id': invitation.id, 'data-state': invitation.state },
    el('div', { class: 'item-head' }, el('strong', {}, to), el('span', { class: 'tag' }, invitation.role),
      el('span', { class: `tag ${STATE_TAG[invitation.state] ?? ''}` }, invitation.state)),
    facts([
      ['Sent', `${invitation.send_count} time(s), last ${when(invitation.last_sent_at)}`],
      ['Expires', when(invitation.expires_at)],
      ['Invited by', invitation.invited_by === 'admin' ? 'the admin' : 'the app'],
      ['Created', when(invitation.created_at)],
      ...(invitation.accepted_at ? [['Accepted', when(invitation.accepted_at)] as [string, string]] : []),
    ]),
    invitation.state !== 'pending' ? null : el('div', { class: 'row' },
      button('Resend', () => void resend(invitation), { 'aria-label': `Resend the invitation to ${to}` }),
      button('Revoke', () => void revoke(invitation), { class: 'danger', 'aria-label': `Revoke the invitation to ${to}` })));
}

async function resend(invitation: Invitation): Promise<void> {
  if (!selected) return;
  const to = invitation.email ?? invitation.phone;
  try {
    const sent = await adminApi.resendInvitation(selected.app.id, selected.tenant.id, invitation.id);
    notify(`Sent the invitation to ${to} again (${sent.send_count} times in all).`);
    await loadInvitations();
  } catch (error) {
    notifyError(error);
  }
}

async function revoke(invitation: Invitation): Promise<void> {
  const to = invitation.email ?? invitation.phone;
  if (!selected || !confirm(`Revoke the invitation to ${to}? Its link stops working.`)) return;
  try {
    await adminApi.revokeInvitation(selected.app.id, selected.tenant.id, invitation.id);
    notify(`Revoked the invitation to ${to}.`);
    await loadInvitations();
  } catch (error) {
    notifyError(error);
  }
}

export function wireInvitations(): void {
  const form = byId<HTMLFormElement>('invite-form');
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    const to = byId<HTMLInputElement>('invite-to').value.trim();
    const role = byId<HTMLSelectElement>('invite-role').value;
    try {
      const invitation = await adminApi.createInvitation(selected.app.id, selected.tenant.id, to.includes('@') ? { email: to, role } : { phone: to, role });
      form.reset();
      clearFormErrors(form);
      notify(`Invited ${invitation.email ?? invitation.phone} into ${selected.tenant.name} as ${invitation.role}.`);
      await loadInvitations();
    } catch (error) {
      showFormError(form, error, FIELDS);
    }
  });
  byId('invitation-state').addEventListener('change', () => { loadInvitations().catch(notifyError); });
}

export function clearInvitations(): void {
  selected = null;
  byId('invitation-list').replaceChildren();
  byId('invitations').hidden = true;
}
