// The console's one status line: the outcome of the last action, or its error.
import { AdminError } from './api.js';
import { byId } from './dom.js';

export function notify(text: string): void {
  const notice = byId('notice');
  notice.textContent = text;
  notice.classList.remove('error');
  notice.hidden = false;
}

/** The event a 401 raises on window: the key no longer works and the console signs out. */
export const UNAUTHORIZED_EVENT = 'admin-key-refused';

/** Shows an API error as `CODE: message`, anything else by its message; a 401 signs the console out. */
export function notifyError(error: unknown): void {
  if (error instanceof AdminError && error.status === 401) {
    window.dispatchEvent(new Event(UNAUTHORIZED_EVENT));
    return;
  }
  const notice = byId('notice');
  notice.textContent = error instanceof AdminError ? `${error.code}: ${error.message}` : `Error: ${(error as Error).message}`;
  notice.classList.add('error');
  notice.hidden = false;
}
