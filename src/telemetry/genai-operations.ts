// Which GenAI operation (gen_ai.operation.name) each inference route performs, by its path as
// listed in src/inference/routes.ts. A route mounted under --api-prefix is found by its path
// after the prefix. A route not listed here that submits tasks anyway is a text_completion
// (completions) or embeddings (embedding inputs).

export type GenAiOperation = 'chat' | 'text_completion' | 'embeddings' | 'rerank' | 'generate_content';

const OPERATIONS: ReadonlyMap<string, GenAiOperation> = new Map<string, GenAiOperation>([
  ['/v1/chat/completions', 'chat'],
  ['/chat/completions', 'chat'],
  ['/v1/responses', 'chat'],
  ['/responses', 'chat'],
  ['/v1/messages', 'chat'],
  ['/completion', 'text_completion'],
  ['/completions', 'text_completion'],
  ['/v1/completions', 'text_completion'],
  ['/infill', 'text_completion'],
  ['/v1/embeddings', 'embeddings'],
  ['/embeddings', 'embeddings'],
  ['/embedding', 'embeddings'],
  // Not a well-known value of the conventions, which have no reranking operation yet.
  ['/v1/rerank', 'rerank'],
  ['/rerank', 'rerank'],
  ['/v1/reranking', 'rerank'],
  ['/reranking', 'rerank'],
  // Audio in, text out: the conventions' multimodal generation.
  ['/v1/audio/transcriptions', 'generate_content'],
  ['/audio/transcriptions', 'generate_content'],
]);

/** The operation of a route template, tried whole and then without each leading segment (an --api-prefix). */
export function genAiOperation(route: string): GenAiOperation | null {
  let path = route;
  for (;;) {
    const operation = OPERATIONS.get(path);
    if (operation) return operation;
    const next = path.indexOf('/', 1);
    if (next < 0) return null;
    path = path.slice(next);
  }
}
