// POST /v1/embeddings, POST /embedding, POST /v1/rerank (and llama-server's aliases).
// Every input of a request is submitted at once, so inputs and concurrent requests share
// decode batches.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { PoolingType } from '../../native/binding.js';
import { base64Floats, normalize, rerankPrompt, rows } from '../service/embedding.js';
import { badRequest, ErrorType, inferenceError } from '../errors.js';
import { inputTooLarge } from '../engine/native-errors.js';
import { checkProjector, isMediaPrompt, splitPrompts, tokenizePrompt, type PromptInput } from '../service/prompt-input.js';
import type { EmbeddingInput } from '../engine/engine.js';
import { BODY_OPTIONS, NativeEmbeddingBody, OpenAIEmbeddingBody, RerankBody } from '../schemas.js';
import type { InferenceService } from '../service/service.js';
import type { Admitted } from '../guards.js';

const OpenAIBody = compileBody(OpenAIEmbeddingBody, BODY_OPTIONS);
const NativeBody = compileBody(NativeEmbeddingBody, BODY_OPTIONS);
const Rerank = compileBody(RerankBody, BODY_OPTIONS);


/**
 * The inputs of a request, tokenized as llama-server tokenizes completion prompts (on worker
 * threads). An input longer than a physical batch cannot be embedded (500, llama-server's
 * message); one that fills the slot's context is a 400. An input with images is tokenized by the
 * engine, which checks the same limits.
 */
async function inputs(service: InferenceService, input: PromptInput, field: string): Promise<EmbeddingInput[]> {
  const prompts = splitPrompts(input);
  checkProjector(prompts, service.vision !== null);
  return Promise.all(prompts.map(async (p, i) => {
    if (isMediaPrompt(p)) return p;
    const tokens = await tokenizePrompt(service.model, service.vocabSize, p);
    if (tokens.length === 0) throw badRequest(`Invalid field "${field}": input ${i} is empty`, { field });
    // Checked here before the context, in llama-server's order (the engine would refuse it too).
    if (tokens.length > service.info.nUbatch) throw inputTooLarge(tokens.length, service.info.nUbatch);
    if (tokens.length > service.info.nCtxSlot) {
      throw inferenceError(ErrorType.EXCEED_CONTEXT, `input (${tokens.length} tokens) is larger than the max context size (${service.info.nCtxSlot} tokens). skipping`, { n_prompt_tokens: tokens.length, n_ctx: service.info.nCtxSlot });
    }
    return tokens;
  }));
}

/** Embeddings need an engine in embedding mode (--embedding), and not a reranker's. */
function checkEmbeddingMode(service: InferenceService): void {
  if (!service.info.embeddings || service.info.pooling === PoolingType.rank) {
    throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support embeddings. Start it with `--embedding`');
  }
}

export async function handleOpenAIEmbeddings({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult> {
  checkEmbeddingMode(service);
  const body = OpenAIBody.parse(req);
  if (service.info.pooling === PoolingType.none) {
    throw badRequest("Pooling type 'none' is not OAI compatible. Please use a different pooling type (--pooling)");
  }
  const prompts = await inputs(service, body.input, 'input');
  const outcomes = await service.embed(prompts, req.signal, tenant);
  const tokens = outcomes.reduce((n, o) => n + o.nPrompt, 0);
  return {
    body: {
      object: 'list',
      data: outcomes.map((o, index) => {
        const vector = normalize(o.embedding, 2);
        return { object: 'embedding', index, embedding: body.encoding_format === 'base64' ? base64Floats(vector) : vector };
      }),
      model: service.alias,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    },
  };
}

export async function handleEmbedding({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult> {
  checkEmbeddingMode(service);
  const body = NativeBody.parse(req);
  const mode = body.embd_normalize ?? service.settings.embdNormalize;
  const input = body.content ?? body.input;
  if (input === undefined) throw badRequest('Invalid field "content": required (or "input")', { field: 'content' });
  const prompts = await inputs(service, input, body.content !== undefined ? 'content' : 'input');
  const outcomes = await service.embed(prompts, req.signal, tenant);
  return {
    body: outcomes.map((o, index) => ({
      index,
      // Pooling none: one raw vector per token; otherwise one normalised vector.
      embedding: service.info.pooling === PoolingType.none
        ? rows(o.embedding, o.nVectors).map((r) => Array.from(r))
        : [normalize(o.embedding, mode)],
    })),
  };
}

export async function handleRerank({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult> {
  if (!service.info.embeddings || service.info.pooling !== PoolingType.rank) {
    throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support reranking. Start it with `--rerank`');
  }
  const body = Rerank.parse(req);
  const documents = body.documents ?? body.texts;
  if (!documents) throw badRequest('Invalid field "documents": required (an array of strings)', { field: 'documents' });
  if (documents.length === 0) throw badRequest('Invalid field "documents": at least one document is required', { field: 'documents' });
  const prompts = documents.map((d) => rerankPrompt(service.model, service.metadata, body.query, d));
  const limit = Math.min(service.info.nBatch, service.info.nCtxSlot);
  prompts.forEach((p, i) => {
    if (p.length > limit) {
      throw inferenceError(ErrorType.EXCEED_CONTEXT, `document ${i} with the query has ${p.length} tokens, more than the ${limit} an input may have (-b, -c)`, { n_prompt_tokens: p.length, n_ctx: limit });
    }
  });
  const outcomes = await service.embed(prompts, req.signal, tenant);
  const ranked = outcomes.map((o, index) => ({ index, score: o.embedding[0]! })).sort((a, b) => b.score - a.score).slice(0, body.top_n ?? documents.length);
  // `texts` asks for TEI's answer (a bare array, `score`, `text` with return_text); `documents` for
  // Jina's (`results`, `relevance_score`, `document.text` with return_text), as llama-server.
  if (body.texts !== undefined && body.documents === undefined) {
    return { body: ranked.map(({ index, score }) => ({ index, score, ...(body.return_text ? { text: documents[index]! } : {}) })) };
  }
  const results = ranked.map(({ index, score }) => ({ index, relevance_score: score, ...(body.return_text ? { document: { text: documents[index]! } } : {}) }));
  const tokens = prompts.reduce((n, p) => n + p.length, 0);
  return { body: { model: body.model ?? service.alias, object: 'list', usage: { prompt_tokens: tokens, total_tokens: tokens }, results } };
}
