// An API refusal shown in words next to the field it names: the admin API's messages start with
// `Invalid field "<name>"` when one field is at fault; the form maps that name to its control,
// whose error line (`<control id>-error`, named by the control's aria-describedby) gets the
// message and whose aria-invalid is set. A refusal naming no known field goes to the form's own
// error line (`.form-error`). The status line says it too, with the error's code.
import { AdminError } from './api.js';
import { byId } from './dom.js';
import { notifyError } from './notice.js';

/** The top-level field an error message names, or null. */
export function fieldOf(error: unknown): string | null {
  if (!(error instanceof AdminError)) return null;
  return /^Invalid field "([A-Za-z_]+)/.exec(error.message)?.[1] ?? null;
}

export function clearFormErrors(form: HTMLFormElement): void {
  for (const line of form.querySelectorAll<HTMLElement>('.field-error, .form-error')) {
    line.textContent = '';
    line.hidden = true;
  }
  for (const control of form.querySelectorAll('[aria-invalid]')) control.removeAttribute('aria-invalid');
}

/**
 * Shows the error in the form (by `fields`: API field name, or error code for refusals that name
 * no field, → control id) and on the status line; focuses the field.
 */
export function showFormError(form: HTMLFormElement, error: unknown, fields: Record<string, string>): void {
  clearFormErrors(form);
  notifyError(error);
  if (error instanceof AdminError && error.status === 401) return;
  const message = error instanceof AdminError ? error.message : `Error: ${(error as Error).message}`;
  const field = fieldOf(error);
  const controlId = (field === null ? undefined : fields[field]) ?? (error instanceof AdminError ? fields[error.code] : undefined);
  const line = controlId ? byId(`${controlId}-error`) : form.querySelector<HTMLElement>('.form-error');
  if (!line) return;
  line.textContent = message;
  line.hidden = false;
  if (!controlId) return;
  const control = byId(controlId);
  control.setAttribute('aria-invalid', 'true');
  (control.matches('fieldset') ? control.querySelector<HTMLElement>('input') : control)?.focus();
}

/** The non-empty lines of a textarea, trimmed. */
export function lines(value: string): string[] {
  return value.split('\n').map((line) => line.trim()).filter(Boolean);
}

/** Words separated by spaces or commas. */
export function words(value: string): string[] {
  return value.split(/[\s,]+/).filter(Boolean);
}
