// Embedding and reranking throughput (issue 4): each profile runs both servers with the same
// flags on a generated BERT model; the figures are inputs (documents) per second.
import { ensureTestModels } from '../test/fixtures/models.js';
import { BenchError, httpJson, requestLoop } from './load.js';
import type { Profile, Scenario } from './scenario.js';

const CONNECTIONS = 16;
const SECONDS = 5;
const WARMUP_SECONDS = 1;
const INPUTS_PER_REQUEST = 8;
const DOCUMENTS_PER_REQUEST = 16;

const WORDS = 'the quick brown fox jumps over a lazy dog while seven small llamas eat green grass near an old river bank'.split(' ');
/** A deterministic sentence of about `n` words. */
const sentence = (seed: number, n: number): string => Array.from({ length: n }, (_, i) => WORDS[(seed * 7 + i * 3) % WORDS.length]).join(' ');

const embeddings: Scenario = {
  id: 'embeddings',
  title: 'embeddings',
  description: `${CONNECTIONS} keep-alive connections, each sending POST /v1/embeddings with ${INPUTS_PER_REQUEST} inputs of ~24 words back to back for ${SECONDS} s after a ${WARMUP_SECONDS} s warm-up; figure = inputs embedded per second.`,
  metrics: [{ key: 'eps', label: 'embeddings/s', unit: 'inputs/s', kind: 'throughput' }],
  timeoutSeconds: 60,
  async run(ctx) {
    const body = { input: Array.from({ length: INPUTS_PER_REQUEST }, (_, i) => sentence(i, 24)) };
    const first = await httpJson(ctx.base, 'POST', '/v1/embeddings', body);
    if (first.status !== 200 || first.body?.data?.length !== INPUTS_PER_REQUEST) throw new BenchError(`${ctx.server}: /v1/embeddings answered ${first.status}`, first.text.slice(0, 500));
    const validate = (text: string): boolean => text.includes('"embedding"');
    await requestLoop(ctx.base, '/v1/embeddings', body, CONNECTIONS, WARMUP_SECONDS, validate);
    const r = await requestLoop(ctx.base, '/v1/embeddings', body, CONNECTIONS, SECONDS, validate);
    return { eps: r.perSecond * INPUTS_PER_REQUEST };
  },
};

const rerank: Scenario = {
  id: 'rerank',
  title: 'rerank',
  description: `${CONNECTIONS} keep-alive connections, each sending POST /v1/rerank with a query and ${DOCUMENTS_PER_REQUEST} documents of ~16 words back to back for ${SECONDS} s after a ${WARMUP_SECONDS} s warm-up; figure = documents scored per second.`,
  metrics: [{ key: 'dps', label: 'rerank documents/s', unit: 'docs/s', kind: 'throughput' }],
  timeoutSeconds: 60,
  async run(ctx) {
    const body = { query: 'which animals eat grass', documents: Array.from({ length: DOCUMENTS_PER_REQUEST }, (_, i) => sentence(i + 3, 16)) };
    const first = await httpJson(ctx.base, 'POST', '/v1/rerank', body);
    if (first.status !== 200 || first.body?.results?.length !== DOCUMENTS_PER_REQUEST) throw new BenchError(`${ctx.server}: /v1/rerank answered ${first.status}`, first.text.slice(0, 500));
    const validate = (text: string): boolean => text.includes('"relevance_score"');
    await requestLoop(ctx.base, '/v1/rerank', body, CONNECTIONS, WARMUP_SECONDS, validate);
    const r = await requestLoop(ctx.base, '/v1/rerank', body, CONNECTIONS, SECONDS, validate);
    return { dps: r.perSecond * DOCUMENTS_PER_REQUEST };
  },
};

// Both servers take llama-server's command line: one cache pool shared by the slots, no web page.
const common = (t: number): string[] => ['-c', '4096', '-np', '8', '-t', String(t), '-tb', String(t), '-b', '512', '-ub', '512', '--kv-unified', '--no-webui'];
const reference: Profile['referenceExtra'] = [];

export const EMBEDDING_PROFILE: Profile = {
  id: 'embedding',
  model: async () => (await ensureTestModels()).embedding,
  commonArgs: (t) => [...common(t), '--embedding'],
  oursExtra: [],
  referenceExtra: reference,
  scenarios: [embeddings],
};

export const RERANK_PROFILE: Profile = {
  id: 'rerank',
  model: async () => (await ensureTestModels()).reranker,
  commonArgs: (t) => [...common(t), '--rerank'],
  oursExtra: [],
  referenceExtra: reference,
  scenarios: [rerank],
};
