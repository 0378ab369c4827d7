// Query-string parameters of the admin routes, parsed once: each reader answers undefined (or the
// fallback) for an absent parameter and 400 VALIDATION_ERROR naming the parameter for a malformed
// one, so no raw query value reaches a service.
import type { HttpRequest } from '../../http/request.js';
import { authError } from '../errors.js';
import { isUuid } from '../service/credentials.js';

/** A UUID, lower-cased. */
export function queryUuid(req: HttpRequest, name: string): string | undefined {
  const raw = req.query.get(name);
  if (raw === null) return undefined;
  if (!isUuid(raw)) throw authError('VALIDATION_ERROR', `Invalid query parameter "${name}": expected a UUID`);
  return raw.toLowerCase();
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** An ISO 8601 instant with a time zone (`2026-11-25T06:00:00Z`). */
export function queryInstant(req: HttpRequest, name: string): Date | undefined {
  const raw = req.query.get(name);
  if (raw === null) return undefined;
  const instant = ISO_INSTANT.test(raw) ? new Date(raw) : new Date(NaN);
  if (Number.isNaN(instant.getTime())) throw authError('VALIDATION_ERROR', `Invalid query parameter "${name}": expected an ISO 8601 instant such as 2026-11-25T06:00:00Z`);
  return instant;
}

/** A decimal integer in [min, max]; `fallback` when absent. */
export function queryInteger(req: HttpRequest, name: string, fallback: number, min: number, max: number): number {
  const raw = req.query.get(name);
  if (raw === null) return fallback;
  const value = /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(value >= min && value <= max)) throw authError('VALIDATION_ERROR', `Invalid query parameter "${name}": expected an integer from ${min} to ${max}`);
  return value;
}

/** A label of at most `maxLength` characters without control characters (PostgreSQL text cannot hold U+0000). */
export function queryLabel(req: HttpRequest, name: string, maxLength = 200): string | undefined {
  const raw = req.query.get(name);
  if (raw === null) return undefined;
  if (raw.length > maxLength || /[\x00-\x1f\x7f]/.test(raw)) throw authError('VALIDATION_ERROR', `Invalid query parameter "${name}": expected a label of at most ${maxLength} characters`);
  return raw;
}
