// POST /v1/embeddings, POST /embedding, POST /v1/rerank (and llama-server's aliases).
// Every input of a request is submitted at once, so inputs and concurrent requests share
// decode batches.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { PoolingType } from '../../native/binding.js';
import { base64Floats, normalize, rerankPrompt, rows } from '../service/embedding.js';
import { badRequest, ErrorType, inferenceError } from '../errors.js';
import { checkTokenIds } from '../service/vocabulary.js';
import { BODY_OPTIONS, NativeEmbeddingBody, OpenAIEmbeddingBody, RerankBody } from '../schemas.js';
import type { InferenceService } from '../service/service.js';

const OpenAIBody = compileBody(OpenAIEmbeddingBody, BODY_OPTIONS);
const NativeBody = compileBody(NativeEmbeddingBody, BODY_OPTIONS);
const Rerank = compileBody(RerankBody, BODY_OPTIONS);


type Input = string | number[] | Array<string | number[]>;

/** The inputs of a request, each tokenized with the model's special tokens (on worker threads). */
async function inputs(service: InferenceService, input: Input, field: string): Promise<Int32Array[]> {
  const list: Array<string | number[]> = typeof input === 'string' ? [input]
    : input.length > 0 && input.every((x) => typeof x === 'number') ? [input as number[]]
    : (input as Array<string | number[]>);
  if (list.length === 0) throw badRequest(`Invalid field "${field}": at least one input is required`, { field });
  const tokenized = await Promise.all(list.map((item) => (typeof item === 'string' ? service.model.tokenizeAsync(item, true, true) : Int32Array.from(item))));
  return tokenized.map((tokens, i) => {
    if (tokens.length === 0) throw badRequest(`Invalid field "${field}": input ${i} is empty`, { field });
    checkTokenIds(tokens, service.vocabSize, field);
    const limit = Math.min(service.info.nBatch, service.info.nCtxSlot);
    if (tokens.length > limit) {
      throw inferenceError(ErrorType.EXCEED_CONTEXT, `input ${i} has ${tokens.length} tokens, more than the ${limit} an input may have (-b, -c)`, { n_prompt_tokens: tokens.length, n_ctx: limit });
    }
    return tokens;
  });
}

/** Embeddings need an engine in embedding mode (--embedding), and not a reranker's. */
function checkEmbeddingMode(service: InferenceService): void {
  if (!service.info.embeddings || service.info.pooling === PoolingType.rank) {
    throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support embeddings. Start it with `--embedding`');
  }
}

export async function handleOpenAIEmbeddings(service: InferenceService, req: HttpRequest): Promise<HttpResult> {
  checkEmbeddingMode(service);
  const body = OpenAIBody.parse(req);
  if (service.info.pooling === PoolingType.none) {
    throw badRequest("Pooling type 'none' is not OAI compatible. Please use a different pooling type (--pooling)");
  }
  const prompts = await inputs(service, body.input as Input, 'input');
  const outcomes = await service.embed(prompts, req.signal);
  const tokens = prompts.reduce((n, p) => n + p.length, 0);
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

export async function handleEmbedding(service: InferenceService, req: HttpRequest): Promise<HttpResult> {
  checkEmbeddingMode(service);
  const body = NativeBody.parse(req);
  const mode = body.embd_normalize ?? 2;
  const prompts = await inputs(service, body.content as Input, 'content');
  const outcomes = await service.embed(prompts, req.signal);
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

export async function handleRerank(service: InferenceService, req: HttpRequest): Promise<HttpResult> {
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
  const outcomes = await service.embed(prompts, req.signal);
  const results = outcomes
    .map((o, index) => ({ index, relevance_score: o.embedding[0]!, ...(body.return_text ? { document: { text: documents[index]! } } : {}) }))
    .sort((a, b) => b.relevance_score - a.relevance_score)
    .slice(0, body.top_n ?? documents.length);
  const tokens = prompts.reduce((n, p) => n + p.length, 0);
  return { body: { model: service.alias, object: 'list', usage: { prompt_tokens: tokens, total_tokens: tokens }, results } };
}
