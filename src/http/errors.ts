// The one error type of the HTTP layer. Handlers throw HttpError; the adapter turns it into a
// response with the product's ErrorFormatter. Any other thrown value is an internal error: it
// is logged with its cause and answered as 500 without details.

export class HttpError extends Error {
  /**
   * @param status HTTP status to answer with.
   * @param code   stable machine-readable code (the product's catalog decides the spelling).
   * @param message human-readable message; safe to show to clients (no stack, no SQL).
   * @param details extra JSON fields a product may merge into its error body.
   */
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'HttpError';
  }
}

/** Codes the HTTP layer itself raises, before any product handler runs. */
export const HttpLayerCode = {
  NOT_FOUND: 'NOT_FOUND',
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  MALFORMED_JSON: 'MALFORMED_JSON',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  VALIDATION_ERROR: 'VALIDATION_ERROR',
  INTERNAL: 'INTERNAL',
} as const;

/** Maps an HttpError to the status and JSON body a product answers with. */
export type ErrorFormatter = (error: HttpError) => { status: number; body: unknown };

/** Normalises anything thrown into an HttpError; unknown errors become 500 INTERNAL. */
export function toHttpError(thrown: unknown): HttpError {
  if (thrown instanceof HttpError) return thrown;
  return new HttpError(500, HttpLayerCode.INTERNAL, 'Internal server error', {}, { cause: thrown });
}
