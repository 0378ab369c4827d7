// The GenAI operation of each inference route, found by its template with or without --api-prefix.
import t from 'tap';
import { genAiOperation } from '../../src/telemetry/genai-operations.js';

t.test('each generating route names its operation', async (t) => {
  t.equal(genAiOperation('/v1/chat/completions'), 'chat');
  t.equal(genAiOperation('/v1/messages'), 'chat');
  t.equal(genAiOperation('/v1/responses'), 'chat');
  t.equal(genAiOperation('/completion'), 'text_completion');
  t.equal(genAiOperation('/v1/completions'), 'text_completion');
  t.equal(genAiOperation('/infill'), 'text_completion');
  t.equal(genAiOperation('/v1/embeddings'), 'embeddings');
  t.equal(genAiOperation('/v1/rerank'), 'rerank');
  t.equal(genAiOperation('/v1/audio/transcriptions'), 'generate_content');
});

t.test('a route under --api-prefix is found by its path after the prefix', async (t) => {
  t.equal(genAiOperation('/llama/v1/chat/completions'), 'chat');
  t.equal(genAiOperation('/a/b/completion'), 'text_completion');
});

t.test('other routes have none', async (t) => {
  t.equal(genAiOperation('/v1/chat/completions/input_tokens'), null);
  t.equal(genAiOperation('/health'), null);
  t.equal(genAiOperation('/admin/apps/:app_id'), null);
  t.equal(genAiOperation('/'), null);
});
