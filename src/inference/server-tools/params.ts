// A tool call's parameters read as llama-server reads them (nlohmann::json through common_json):
// a required value that is missing or of the wrong type throws ToolParamError, whose message is
// the JSON library's own and which POST /tools answers 400; an optional one of the wrong type
// falls back to its default (server-common.h json_value).

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A malformed body or parameter: 400 invalid_request_error with this message. */
export class ToolParamError extends Error {}

/** nlohmann's type names, as its messages spell them. */
export function jsonTypeName(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number') return 'number';
  return 'string';
}

/** `value.at(key)`: the member, or nlohmann's out_of_range / type_error. */
export function at(value: Json, key: string): Json {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ToolParamError(`[json.exception.type_error.304] cannot use at() with ${jsonTypeName(value)}`);
  }
  if (!Object.hasOwn(value, key)) throw new ToolParamError(`[json.exception.out_of_range.403] key '${key}' not found`);
  return value[key]!;
}

/** `get<std::string>()`. */
export function asString(value: Json): string {
  if (typeof value !== 'string') throw new ToolParamError(`[json.exception.type_error.302] type must be string, but is ${jsonTypeName(value)}`);
  return value;
}

/** `get<bool>()`. */
export function asBoolean(value: Json): boolean {
  if (typeof value !== 'boolean') throw new ToolParamError(`[json.exception.type_error.302] type must be boolean, but is ${jsonTypeName(value)}`);
  return value;
}

/** `get<int>()`: a number (a fraction truncated toward zero, wrapped to 32 bits) or a boolean (0/1). */
export function asInt(value: Json): number {
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value !== 'number') throw new ToolParamError(`[json.exception.type_error.302] type must be number, but is ${jsonTypeName(value)}`);
  return Math.trunc(value) | 0;
}

/** A required string member: `params.at(key).get<std::string>()`. */
export const requiredString = (params: Json, key: string): string => asString(at(params, key));

function optional<T>(params: Json, key: string, fallback: T, read: (v: Json) => T): T {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return fallback;
  const v = params[key];
  if (v === undefined || v === null) return fallback;
  try {
    return read(v);
  } catch {
    return fallback;
  }
}

/** json_value(params, key, default) for each type a tool reads. */
export const optionalString = (params: Json, key: string, fallback: string): string => optional(params, key, fallback, asString);
export const optionalInt = (params: Json, key: string, fallback: number): number => optional(params, key, fallback, asInt);
export const optionalBoolean = (params: Json, key: string, fallback: boolean): boolean => optional(params, key, fallback, asBoolean);

/** Text as the C++ code holds it: one char per byte of its UTF-8, so lengths, caps and regexes work on bytes. */
export const toBytes = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');

/** Bytes back to text; invalid UTF-8 becomes U+FFFD, as llama-server's safe_json_to_str. */
export const fromBytes = (bytes: string): string => Buffer.from(bytes, 'latin1').toString('utf8');
