// multipart/form-data bodies (file uploads), parsed by Node's own Fetch implementation.
import { HttpError, HttpLayerCode } from './errors.js';
import type { HttpRequest } from './request.js';

/** The request's form, or null when its body is not multipart/form-data; a malformed one is a 400. */
export async function readMultipartForm(req: Pick<HttpRequest, 'headers' | 'body'>): Promise<FormData | null> {
  const contentType = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data/i.test(contentType)) return null;
  try {
    return await new Response(req.body, { headers: { 'content-type': contentType } }).formData();
  } catch (err) {
    throw new HttpError(400, HttpLayerCode.VALIDATION_ERROR, `Invalid multipart body: ${(err as Error).message}`);
  }
}
