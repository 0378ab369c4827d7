// POST /infill: code fill-in-the-middle, as llama-server serves it. The prompt is built from the
// model's FIM tokens (../infill.ts); generation, response and stream are /completion's.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody, parseJson } from '../../http/validation.js';
import { badRequest } from '../errors.js';
import { buildTaskSpec } from '../service/generation.js';
import { buildInfillPrompt, missingFimTokens } from '../service/infill-prompt.js';
import { checkTokenIds } from '../service/vocabulary.js';
import { BODY_OPTIONS, InfillBody } from '../schemas.js';
import { answerCompletions } from './completion.js';
import type { Admitted } from '../guards.js';

const Body = compileBody(InfillBody, BODY_OPTIONS);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * llama-server's own checks of an /infill body, with its messages, in its order (each 400 also
 * names the field); the schema then checks the rest.
 */
function checkInfillFields(raw: unknown): void {
  if (!isObject(raw)) return;
  if ('prompt' in raw && typeof raw.prompt !== 'string') throw badRequest('"prompt" must be a string', { field: 'prompt' });
  if (!('input_prefix' in raw)) throw badRequest('"input_prefix" is required', { field: 'input_prefix' });
  if (!('input_suffix' in raw)) throw badRequest('"input_suffix" is required', { field: 'input_suffix' });
  if ('input_extra' in raw && !Array.isArray(raw.input_extra)) {
    throw badRequest('"input_extra" must be an array of {"filename": string, "text": string}', { field: 'input_extra' });
  }
  const extra = (raw.input_extra ?? []) as unknown[];
  extra.forEach((chunk, i) => {
    if (!isObject(chunk) || typeof chunk.text !== 'string') {
      throw badRequest(`Invalid field "input_extra[${i}].text": extra_context chunk must contain a "text" field with a string value`, { field: `input_extra[${i}].text` });
    }
    if ('filename' in chunk && typeof chunk.filename !== 'string') {
      throw badRequest(`Invalid field "input_extra[${i}].filename": extra_context chunk's "filename" field must be a string`, { field: `input_extra[${i}].filename` });
    }
  });
}


export async function handleInfill(admitted: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  const { service } = admitted;
  // The model comes first, as in llama-server: without FIM tokens nothing else is looked at.
  const { tokens, addBos } = service.metadata;
  const missing = missingFimTokens(tokens);
  if (missing !== null) throw badRequest(missing);

  const raw = parseJson(req, false);
  checkInfillFields(raw);
  const body = Body.check(raw);
  if (typeof body.input_prefix !== 'string') checkTokenIds(body.input_prefix, service.vocabSize, 'input_prefix');
  if (typeof body.input_suffix !== 'string') checkTokenIds(body.input_suffix, service.vocabSize, 'input_suffix');

  const prompt = buildInfillPrompt(
    {
      tokenize: (text, addSpecial, parseSpecial) => service.model.tokenize(text, addSpecial, parseSpecial),
      fimPre: tokens.fimPre!,
      fimSuf: tokens.fimSuf!,
      fimMid: tokens.fimMid!,
      fimRep: tokens.fimRep,
      fimSep: tokens.fimSep,
      bos: tokens.bos,
      addBos,
    },
    {
      prefix: body.input_prefix,
      suffix: body.input_suffix,
      extra: body.input_extra ?? [],
      // The text after the cursor: special-token text is parsed here, as llama-server does.
      prompt: service.model.tokenize(body.prompt ?? '', false, true),
    },
    { nBatch: service.info.nBatch, nPredict: service.defaultNPredict, nCtx: service.info.nCtxSlot, spmInfill: service.settings.spmInfill },
  );
  service.checkPromptFits(prompt);
  const spec = buildTaskSpec(service, body, prompt);
  return answerCompletions(req, admitted, body, [spec]);
}
