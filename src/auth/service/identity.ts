// Normalisation of login identifiers, so that one person is one user: e-mail addresses are
// trimmed and lower-cased; phone numbers lose spaces, dots, dashes and parentheses and must then
// be E.164 (`+` and 7 to 15 digits, no leading zero).
import { authError } from '../errors.js';
import type { Identifier } from '../queries/users.js';

const EMAIL = /^[^\s@\x00-\x1f\x7f]+@[^\s@\x00-\x1f\x7f]+\.[^\s@\x00-\x1f\x7f]+$/;
const E164 = /^\+[1-9][0-9]{6,14}$/;

/** Exactly one of email or phone; 400 VALIDATION_ERROR otherwise. */
export function identifierOf(input: { email?: string; phone?: string }): Identifier {
  if ((input.email === undefined) === (input.phone === undefined)) {
    throw authError('VALIDATION_ERROR', 'Give exactly one of "email" or "phone"');
  }
  if (input.email !== undefined) {
    const email = input.email.trim().toLowerCase();
    if (email.length > 254 || !EMAIL.test(email)) throw authError('VALIDATION_ERROR', 'Invalid field "email": not an e-mail address', { details: { field: 'email' } });
    return { channel: 'email', value: email };
  }
  const phone = input.phone!.replace(/[\s().-]/g, '');
  if (!E164.test(phone)) throw authError('VALIDATION_ERROR', 'Invalid field "phone": expected an E.164 number such as +14155550123', { details: { field: 'phone' } });
  return { channel: 'phone', value: phone };
}
