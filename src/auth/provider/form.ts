// The `application/x-www-form-urlencoded` bodies of the provider's endpoints (the token endpoint,
// the sign-in page's forms), read as RFC 6749 section 3.2 says: UTF-8, no parameter twice, no
// control characters. Unknown parameters are ignored (RFC 6749 section 3.1).
import type { HttpRequest } from '../../http/request.js';
import { authError } from '../errors.js';
import { formParameters, PLAIN } from '../oauth-request.js';

const MAX_VALUE_CHARS = 8192;

/** The named parameters of the form; 400 VALIDATION_ERROR (invalid_request) for a body that breaks the rules above. */
export function parseForm(req: HttpRequest, names: readonly string[]): Map<string, string> {
  const wanted = new Set(names);
  const values = new Map<string, string>();
  for (const [name, value] of formParameters(req)) {
    if (!wanted.has(name)) continue;
    if (values.has(name)) throw authError('VALIDATION_ERROR', `Parameter "${name}" is repeated`);
    if (value.length > MAX_VALUE_CHARS || !PLAIN.test(value)) throw authError('VALIDATION_ERROR', `Invalid parameter "${name}"`);
    values.set(name, value);
  }
  return values;
}
