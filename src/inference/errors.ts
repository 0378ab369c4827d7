// The inference server's error catalog. Bodies follow llama-server (and so OpenAI clients):
// {"error": {"code": <http status>, "message": "...", "type": "<type>"}}.
import { HttpError, HttpLayerCode, type ErrorFormatter } from '../http/errors.js';

export const ErrorType = {
  INVALID_REQUEST: 'invalid_request_error',
  AUTHENTICATION: 'authentication_error',
  NOT_FOUND: 'not_found_error',
  SERVER: 'server_error',
  PERMISSION: 'permission_error',
  UNAVAILABLE: 'unavailable_error',
  NOT_SUPPORTED: 'not_supported_error',
  EXCEED_CONTEXT: 'exceed_context_size_error',
  RATE_LIMIT: 'rate_limit_error',
} as const;

export type ErrorTypeName = (typeof ErrorType)[keyof typeof ErrorType];

const STATUS_OF: Record<ErrorTypeName, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  server_error: 500,
  not_supported_error: 501,
  unavailable_error: 503,
  exceed_context_size_error: 400,
  rate_limit_error: 429,
};

/** Throws-ready error of the catalog; `details` are merged into the error object. */
export function inferenceError(type: ErrorTypeName, message: string, details: Record<string, unknown> = {}): HttpError {
  return new HttpError(STATUS_OF[type], type, message, details);
}

export const badRequest = (message: string, details?: Record<string, unknown>): HttpError =>
  inferenceError(ErrorType.INVALID_REQUEST, message, details);

/** A tenant over one of its limits (tenants/rate-limits.ts), in OpenAI's shape: code "rate_limit_exceeded". */
export const rateLimited = (message: string): HttpError =>
  inferenceError(ErrorType.RATE_LIMIT, message, { code: 'rate_limit_exceeded', param: null });

export const loadingModel = (): HttpError => inferenceError(ErrorType.UNAVAILABLE, 'Loading model');

/** The HTTP layer's own codes, as llama-server would type them. */
function typeOf(error: HttpError): string {
  if ((Object.values(ErrorType) as string[]).includes(error.code)) return error.code;
  switch (error.code) {
    case HttpLayerCode.NOT_FOUND: return ErrorType.NOT_FOUND;
    case HttpLayerCode.INTERNAL: return ErrorType.SERVER;
    default: return error.status >= 500 ? ErrorType.SERVER : ErrorType.INVALID_REQUEST;
  }
}

export const formatInferenceError: ErrorFormatter = (error) => ({
  status: error.status,
  body: { error: { code: error.status, message: error.message, type: typeOf(error), ...error.details } },
});
