// The `application/x-www-form-urlencoded` bodies of the provider's endpoints (the token endpoint,
// the sign-in page's forms), read as RFC 6749 section 3.2 says: UTF-8, no parameter twice, no
// control characters. Unknown parameters are ignored (RFC 6749 section 3.1).
import type { HttpRequest } from '../../http/request.js';
import { authError } from '../errors.js';
import { PLAIN } from '../oauth-request.js';

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const MAX_VALUE_CHARS = 8192;

/** The named parameters of the form; 400 VALIDATION_ERROR (invalid_request) for a body that breaks the rules above. */
export function parseForm(req: HttpRequest, names: readonly string[]): Map<string, string> {
  const type = req.headers['content-type'];
  if (type === undefined || !FORM_TYPE.test(type)) throw authError('VALIDATION_ERROR', 'Send the parameters as application/x-www-form-urlencoded');
  let text: string;
  try {
    text = UTF8.decode(req.body);
  } catch {
    throw authError('VALIDATION_ERROR', 'The form is not valid UTF-8');
  }
  const wanted = new Set(names);
  const values = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(text)) {
    if (!wanted.has(name)) continue;
    if (values.has(name)) throw authError('VALIDATION_ERROR', `Parameter "${name}" is repeated`);
    if (value.length > MAX_VALUE_CHARS || !PLAIN.test(value)) throw authError('VALIDATION_ERROR', `Invalid parameter "${name}"`);
    values.set(name, value);
  }
  return values;
}
