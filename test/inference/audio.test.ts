// Audio input where no projector reads audio (the only case this server has: its engine takes
// images only), answered exactly as llama-server built from the same source answers it, with no
// projector and with the image projector: an input_audio part in a chat, and
// /v1/audio/transcriptions with a WAV upload (and /v1/responses, which takes no audio part there).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ensureAudioProjector } from '../fixtures/audio-projector.js';
import { ensureTestModels } from '../fixtures/models.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();

/** A 0.1 s, 16 kHz, 16-bit mono WAV of silence. */
function wav(): Buffer {
  const samples = 1600;
  const b = Buffer.alloc(44 + samples * 2);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + samples * 2, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(16000, 24);
  b.writeUInt32LE(32000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36);
  b.writeUInt32LE(samples * 2, 40);
  return b;
}

async function answer(base: string, path: string, init: RequestInit): Promise<{ status: number; body: unknown }> {
  const res = await fetch(base + path, init);
  return { status: res.status, body: await res.json() };
}

const chatWithAudio = {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is said?' }, { type: 'input_audio', input_audio: { data: wav().toString('base64'), format: 'wav' } }] }], max_tokens: 4 }),
};

function transcription(): RequestInit {
  const form = new FormData();
  form.append('file', new Blob([wav()], { type: 'audio/wav' }), 'speech.wav');
  form.append('model', 'whisper-1');
  form.append('response_format', 'json');
  return { method: 'POST', body: form };
}

for (const [what, extra] of [['without a projector', []], ['with the image projector', ['-mm', models.mmproj]]] as const) {
  t.test(`${what}: an input_audio part and /v1/audio/transcriptions answer as llama-server's`, async (t) => {
    const ours = await startTestServer(models.chat, { ctxSize: 512, parallel: 1, ...(extra.length ? { mmproj: extra[1] } : {}) });
    t.teardown(ours.close);
    const llama = await startLlamaServer(['-m', models.chat, '-c', '512', '-np', '1', ...extra]);
    t.teardown(llama.close);
    const chat = await answer(ours.base, '/v1/chat/completions', chatWithAudio);
    t.same(chat, await answer(llama.base, '/v1/chat/completions', chatWithAudio));
    t.same(chat, { status: 500, body: { error: { code: 500, message: 'audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj', type: 'server_error' } } });
    // The Responses API takes no audio part in llama-server (input_text, input_image, input_file).
    const responses = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: wav().toString('base64'), format: 'wav' } }] }], max_output_tokens: 4 }) };
    const ourResponses = await answer(ours.base, '/v1/responses', responses);
    const llamaResponses = await answer(llama.base, '/v1/responses', responses) as { status: number; body: { error: { message: string } } };
    t.same(llamaResponses, { status: 400, body: { error: { code: 400, message: "'type' must be one of 'input_text', 'input_image', or 'input_file'", type: 'invalid_request_error' } } });
    // This server's Responses errors name the field (its own difference, not audio's).
    t.same(ourResponses, { status: 400, body: { error: { code: 400, message: `Invalid field "input[0].content[0]": ${llamaResponses.body.error.message}`, type: 'invalid_request_error', field: 'input[0].content[0]' } } }, '/v1/responses');
    for (const path of ['/v1/audio/transcriptions', '/audio/transcriptions']) {
      const ourAnswer = await answer(ours.base, path, transcription());
      t.same(ourAnswer, await answer(llama.base, path, transcription()), path);
      t.same(ourAnswer, { status: 501, body: { error: { code: 501, message: 'The current model does not support audio input.', type: 'not_supported_error' } } });
    }
  });
}

// The generated audio projector works: llama-server reads WAV and MP3 through it. This server does
// not (its engine, native/task-parse.cpp, takes image chunks only) and answers as it does without
// an audio projector. When audio is implemented, these answers become llama-server's.
t.test('a generated audio projector (qwen2a): llama-server reads WAV and MP3 through it; this server answers as without audio', async (t) => {
  const projector = await ensureAudioProjector();
  const llama = await startLlamaServer(['-m', models.chat, '-mm', projector, '-c', '2048', '-np', '1']);
  t.teardown(llama.close);
  const ours = await startTestServer(models.chat, { ctxSize: 2048, parallel: 1, mmproj: projector });
  t.teardown(ours.close);
  const mp3 = readFileSync(join(REPO_ROOT, 'vendor', 'llama.cpp', 'tools', 'mtmd', 'test-2.mp3'));
  const text = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'What is said?' }], max_tokens: 4, temperature: 0 }) };
  const textTokens = ((await answer(llama.base, '/v1/chat/completions', text)).body as any).usage.prompt_tokens as number;
  for (const [format, bytes] of [['wav', wav()], ['mp3', mp3]] as const) {
    const withAudio = { ...text, body: JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is said?' }, { type: 'input_audio', input_audio: { data: bytes.toString('base64'), format } }] }], max_tokens: 4, temperature: 0 }) };
    const theirs = await answer(llama.base, '/v1/chat/completions', withAudio) as { status: number; body: any };
    t.equal(theirs.status, 200, `llama-server: ${format}`);
    t.ok(theirs.body.usage.prompt_tokens > textTokens + 100, `llama-server: the ${format} adds its audio positions to the prompt (${theirs.body.usage.prompt_tokens} tokens, ${textTokens} without)`);
    t.same(await answer(ours.base, '/v1/chat/completions', withAudio), { status: 500, body: { error: { code: 500, message: 'audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj', type: 'server_error' } } }, `ours: ${format}`);
  }
  const transcribed = await answer(llama.base, '/v1/audio/transcriptions', transcription()) as { status: number; body: any };
  t.match(transcribed, { status: 200, body: { type: 'transcript.text.done', text: String } }, 'llama-server transcribes (json)');
  const form = new FormData();
  form.append('file', new Blob([wav()], { type: 'audio/wav' }), 'speech.wav');
  form.append('response_format', 'text');
  t.same(await answer(llama.base, '/v1/audio/transcriptions', { method: 'POST', body: form }),
    { status: 400, body: { error: { code: 400, message: "Only 'json' response_format is supported for transcription", type: 'invalid_request_error' } } }, 'llama-server takes only response_format json');
  t.equal((await answer(ours.base, '/v1/audio/transcriptions', transcription())).status, 501, 'ours: 501, as without audio');
});
