// POST /tokenize, POST /detokenize, POST /apply-template.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { renderChat } from '../service/chat-prompt.js';
import { badRequest } from '../errors.js';
import { checkTokenIds } from '../service/vocabulary.js';
import { BODY_OPTIONS, ApplyTemplateBody, DetokenizeBody, TokenizeBody } from '../schemas.js';
import type { Admitted } from '../guards.js';

const Tokenize = compileBody(TokenizeBody, BODY_OPTIONS);
const Detokenize = compileBody(DetokenizeBody, BODY_OPTIONS);
const ApplyTemplate = compileBody(ApplyTemplateBody, BODY_OPTIONS);

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A token's text, or its bytes when they are not valid UTF-8 on their own (llama-server). */
function pieceOf(bytes: Uint8Array): string | number[] {
  try {
    return utf8.decode(bytes);
  } catch {
    return [...bytes];
  }
}

export async function handleTokenize({ service }: Admitted, req: HttpRequest): Promise<HttpResult> {
  const body = Tokenize.parse(req);
  // Tokenizing runs on a worker thread: the JS thread keeps serving other connections.
  const tokens = await service.model.tokenizeAsync(body.content, body.add_special ?? false, body.parse_special ?? true);
  if (!body.with_pieces) return { body: { tokens: [...tokens] } };
  return { body: { tokens: [...tokens].map((id) => ({ id, piece: pieceOf(service.model.tokenPiece(id, true)) })) } };
}

export function handleDetokenize({ service }: Admitted, req: HttpRequest): HttpResult {
  const body = Detokenize.parse(req);
  checkTokenIds(body.tokens, service.vocabSize, 'tokens');
  return { body: { content: service.model.detokenize(body.tokens) } };
}

export async function handleApplyTemplate({ service }: Admitted, req: HttpRequest): Promise<HttpResult> {
  const body = ApplyTemplate.parse(req);
  // Images are rendered as their markers; their bytes are not fetched for a template alone.
  const rendered = await renderChat(service, body, { allowRemote: false });
  return { body: { prompt: rendered.prompt } };
}
