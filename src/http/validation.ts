// JSON bodies: parsed once, checked against a TypeBox schema compiled at route registration.
import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { ValueError } from '@sinclair/typebox/errors';
import { HttpError, HttpLayerCode } from './errors.js';
import type { HttpRequest } from './request.js';

export interface BodyValidator<T> {
  /** Parses and validates the body; throws HttpError 400 (MALFORMED_JSON / VALIDATION_ERROR) or 415. */
  parse(req: HttpRequest): T;
  /** Validates an already parsed value. */
  check(value: unknown): T;
}

export interface BodyOptions {
  /**
   * When true (the default), a body whose Content-Type is present and not JSON is refused with 415.
   * The inference API turns this off, as llama-server does, so that `curl -d '{...}'` works.
   */
  strictContentType?: boolean;
  /**
   * When true, a string holding a lone UTF-16 surrogate (from an escape such as "\ud800"), at
   * any depth, is a 400 VALIDATION_ERROR naming its field. Default false.
   */
  wellFormedStrings?: boolean;
  /**
   * Deepest nesting of arrays and objects accepted (the body itself is level 1); deeper is a
   * 400 VALIDATION_ERROR naming the top-level field. Default unlimited. Code that recurses over
   * a value (JSON.stringify, native parsers) would otherwise overflow its stack.
   */
  maxDepth?: number;
}

/** Compile once per route; `parse` is then cheap per request. */
export function compileBody<S extends TSchema>(schema: S, options: BodyOptions = {}): BodyValidator<Static<S>> {
  const strict = options.strictContentType ?? true;
  const compiled = TypeCompiler.Compile(schema);
  const inspect = options.wellFormedStrings || options.maxDepth !== undefined;
  const check = (value: unknown): Static<S> => {
    const flaw = inspect ? findFlaw(value, options.wellFormedStrings ?? false, options.maxDepth ?? Infinity) : null;
    if (flaw) {
      const field = jsonPointerToField(flaw.pointer);
      throw new HttpError(400, HttpLayerCode.VALIDATION_ERROR, field ? `Invalid field "${field}": ${flaw.what}` : `Invalid request body: ${flaw.what}`, field ? { field } : {});
    }
    if (compiled.Check(value)) return value;
    const top = compiled.Errors(value).First();
    const first = top ? deepest(top) : undefined;
    const field = first ? jsonPointerToField(first.path) : '';
    const message = first
      ? field ? `Invalid field "${field}": ${first.message}` : `Invalid request body: ${first.message}`
      : 'Invalid request body';
    throw new HttpError(400, HttpLayerCode.VALIDATION_ERROR, message, field ? { field } : {});
  };
  return {
    check,
    parse: (req) => check(parseJson(req, strict)),
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Any surrogate: a cheap first test (most strings hold none) before LONE_SURROGATE's look-arounds. */
const SURROGATE = /[\ud800-\udfff]/;

/** Parses the body as JSON. With `strictContentType`, a body sent with a non-JSON content type is 415. */
export function parseJson(req: HttpRequest, strictContentType = true): unknown {
  const type = req.headers['content-type'];
  if (strictContentType && type !== undefined && type !== '' && !/^application\/(?:[\w.+-]+\+)?json\b/i.test(type) && !/^text\/plain\b/i.test(type)) {
    throw new HttpError(415, HttpLayerCode.UNSUPPORTED_MEDIA_TYPE, `Unsupported content type "${type}": send application/json`);
  }
  if (req.body.length === 0) throw new HttpError(400, HttpLayerCode.MALFORMED_JSON, 'Request body is empty: a JSON object is required');
  // JSON text is UTF-8 (RFC 8259): invalid bytes are refused, not silently replaced by U+FFFD.
  let text: string;
  try {
    text = utf8.decode(req.body);
  } catch {
    throw new HttpError(400, HttpLayerCode.MALFORMED_JSON, 'Malformed JSON in request body: the body is not valid UTF-8');
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, HttpLayerCode.MALFORMED_JSON, `Malformed JSON in request body: ${(err as Error).message}`);
  }
}

/**
 * The first flaw of a parsed value that a schema cannot express: a string (a value, or a key:
 * reported at its object) holding a lone UTF-16 surrogate, which comes from a JSON escape
 * ("\ud800") and has no UTF-8 form; or nesting deeper than `maxDepth` (reported at its
 * top-level field). Iterative, so any depth is walked safely.
 */
function findFlaw(root: unknown, wellFormed: boolean, maxDepth: number): { pointer: string; what: string } | null {
  const lone = (pointer: string) => ({ pointer, what: 'a string holds a lone UTF-16 surrogate (\\ud800-\\udfff not in a pair)' });
  const isLone = (text: string): boolean => wellFormed && SURROGATE.test(text) && LONE_SURROGATE.test(text);
  if (typeof root === 'string') return isLone(root) ? lone('') : null;
  if (typeof root !== 'object' || root === null) return null;
  if (maxDepth < 1) return { pointer: '', what: `nested more than ${maxDepth} levels deep` };
  // Depth first, in document order: a frame per open container (the body's is level 1), its keys
  // (null for an array) and the next one to visit. Pointers are built only for a flaw found, from
  // the frames' names: checking a well-formed body builds no string.
  const frames: FlawFrame[] = [frameOf(root, '')];
  const pointer = (upTo: number, last?: string): string => {
    let out = '';
    for (let i = 1; i <= upTo; i++) out += `/${escapePointer(frames[i]!.name)}`;
    return last === undefined ? out : `${out}/${escapePointer(last)}`;
  };
  if (frames[0]!.keys) for (const name of frames[0]!.keys) if (isLone(name)) return lone('');
  while (frames.length > 0) {
    const top = frames[frames.length - 1]!;
    const count = top.keys ? top.keys.length : (top.value as unknown[]).length;
    if (top.next >= count) {
      frames.pop();
      continue;
    }
    const index = top.next++;
    const name = top.keys ? top.keys[index]! : String(index);
    const item: unknown = top.keys ? (top.value as Record<string, unknown>)[name] : (top.value as unknown[])[index];
    if (typeof item === 'string') {
      if (isLone(item)) return lone(pointer(frames.length - 1, name));
      continue;
    }
    if (typeof item !== 'object' || item === null) continue;
    if (frames.length + 1 > maxDepth) {
      const field = frames.length > 1 ? frames[1]!.name : name;
      return { pointer: `/${escapePointer(field)}`, what: `nested more than ${maxDepth} levels deep` };
    }
    const frame = frameOf(item, name);
    if (frame.keys) for (const key of frame.keys) if (isLone(key)) return lone(pointer(frames.length - 1, name));
    frames.push(frame);
  }
  return null;
}

interface FlawFrame {
  value: object;
  /** An object's own keys; null for an array. */
  keys: string[] | null;
  next: number;
  /** The key (or index) the container sits under in its parent. */
  name: string;
}

function frameOf(value: object, name: string): FlawFrame {
  return { value, keys: Array.isArray(value) ? null : Object.keys(value), next: 0, name };
}

/** A JSON Pointer's escaping of one reference token (RFC 6901). */
function escapePointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * A union's own error ("Expected union value") says little: report instead the error of the
 * variant that matched deepest into the value, which names the offending field.
 */
function deepest(error: ValueError): ValueError {
  let best = error;
  const sameKind: ValueError[] = [];
  for (const variant of error.errors ?? []) {
    const inner = variant.First();
    if (!inner) continue;
    const candidate = deepest(inner);
    if (candidate.path.length > best.path.length) best = candidate;
    if (isKindOf(inner.schema.type, inner.value)) sameKind.push(candidate);
  }
  // A scalar union (integer or null): the one variant of the value's own kind says what is wrong.
  return best === error && sameKind.length === 1 ? sameKind[0]! : best;
}

/** True when a value is of a schema's JSON type (its bounds aside). */
function isKindOf(type: unknown, value: unknown): boolean {
  const kind = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  return type === kind || (type === 'integer' && kind === 'number');
}

/** `/messages/0/role` -> `messages[0].role` */
export function jsonPointerToField(pointer: string): string {
  let field = '';
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    field += /^\d+$/.test(part) ? `[${part}]` : field === '' ? part : `.${part}`;
  }
  return field;
}
