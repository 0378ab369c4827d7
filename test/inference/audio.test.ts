// Audio input, against llama-server built from the same source. Where no projector reads audio
// (none, or the image projector), an input_audio part in a chat and /v1/audio/transcriptions are
// refused exactly as there (and /v1/responses takes no audio part there). With the generated
// audio projector (qwen2a), WAV and MP3 clips give the same prompts, answers and errors.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ensureAudioProjector } from '../fixtures/audio-projector.js';
import { ensureTestModels } from '../fixtures/models.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';
import { wav } from '../helpers/wav.js';

const models = await ensureTestModels();

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

/** An OpenAI chat request with one audio clip after the text, greedy. */
function chatWith(bytes: Buffer, format: string, extra: Record<string, unknown> = {}): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is said?' }, { type: 'input_audio', input_audio: { data: bytes.toString('base64'), format } }] }], max_tokens: 8, temperature: 0, ...extra }),
  };
}

function transcriptionOf(bytes: Buffer, fields: Record<string, string>): RequestInit {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type: 'audio/wav' }), 'speech.wav');
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  return { method: 'POST', body: form };
}

/** The data payloads of an SSE body. */
async function events(base: string, path: string, init: RequestInit): Promise<unknown[]> {
  const res = await fetch(base + path, init);
  const text = await res.text();
  return text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => (l === 'data: [DONE]' ? '[DONE]' : JSON.parse(l.slice(6))));
}

t.test('the generated audio projector (qwen2a): WAV and MP3 in chats and transcriptions answer as llama-server', async (t) => {
  const projector = await ensureAudioProjector();
  const llama = await startLlamaServer(['-m', models.chat, '-mm', projector, '-c', '4096', '-np', '1']);
  t.teardown(llama.close);
  const ours = await startTestServer(models.chat, { ctxSize: 4096, parallel: 1, mmproj: projector, maxBodyBytes: 8 << 20 });
  t.teardown(ours.close);
  const both = async (path: string, init: () => RequestInit) => [await answer(ours.base, path, init()), await answer(llama.base, path, init())] as Array<{ status: number; body: any }>;

  const [ourProps, theirProps] = await both('/props', () => ({ method: 'GET' }));
  t.same(ourProps!.body.modalities, { vision: false, video: false, audio: true }, '/props: audio, no vision');
  t.same(ourProps!.body.modalities, theirProps!.body.modalities, "/props' modalities as llama-server's");

  const text = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'What is said?' }], max_tokens: 8, temperature: 0 }) };
  const textTokens = (await both('/v1/chat/completions', () => text))[0]!.body.usage.prompt_tokens as number;
  const mp3 = readFileSync(join(REPO_ROOT, 'vendor', 'llama.cpp', 'tools', 'mtmd', 'test-2.mp3'));
  // 35 s: mtmd cuts a clip into 30 s chunks, two here.
  for (const [format, bytes] of [['wav', wav(0.5)], ['mp3', mp3], ['wav', wav(35)]] as const) {
    const [mine, theirs] = await both('/v1/chat/completions', () => chatWith(bytes, format));
    t.equal(mine!.status, 200, `${format}: 200`);
    t.ok(mine!.body.usage.prompt_tokens > textTokens + 100, `${format}: the clip adds its audio positions to the prompt (${mine!.body.usage.prompt_tokens} tokens, ${textTokens} without)`);
    t.same(mine!.body.usage, theirs!.body.usage, `${format}: the same prompt and completion token counts`);
    t.equal(mine!.body.choices[0].message.content, theirs!.body.choices[0].message.content, `${format}: the same greedy answer`);
  }

  // The same 35 s clip again: both its chunks come from the cache.
  const again = await answer(ours.base, '/v1/chat/completions', chatWith(wav(35), 'wav')) as { body: any };
  t.equal(again.body.timings.cache_n, again.body.usage.prompt_tokens - 1, 'the same clip again: every prompt position but the last is reused');

  for (const path of ['/v1/audio/transcriptions', '/audio/transcriptions']) {
    const [mine, theirs] = await both(path, () => transcriptionOf(wav(1), { model: 'whisper-1', temperature: '0', max_tokens: '8', language: 'en' }));
    t.equal(mine!.status, 200, `${path}: 200`);
    t.match(mine!.body, { type: 'transcript.text.done', text: String, usage: { type: 'tokens', input_tokens: Number, output_tokens: 8, total_tokens: Number, input_tokens_details: { cached_tokens: Number } } }, `${path}: llama-server's shape`);
    t.equal(mine!.body.text, theirs!.body.text, `${path}: the same transcript`);
    t.same([mine!.body.usage.input_tokens, mine!.body.usage.output_tokens], [theirs!.body.usage.input_tokens, theirs!.body.usage.output_tokens], `${path}: the same token counts`);
  }

  const jsonText = (await answer(ours.base, '/v1/audio/transcriptions', transcriptionOf(wav(1), { temperature: '0', max_tokens: '8' })) as { body: any }).body.text as string;
  const streamed = await events(ours.base, '/v1/audio/transcriptions', transcriptionOf(wav(1), { temperature: '0', max_tokens: '8', stream: 'true' }));
  const theirStream = await events(llama.base, '/v1/audio/transcriptions', transcriptionOf(wav(1), { temperature: '0', max_tokens: '8', stream: 'true' }));
  const deltas = (list: unknown[]) => list.filter((e: any) => e?.type === 'transcript.text.delta').map((e: any) => e.delta as string).join('');
  t.equal(deltas(streamed), jsonText, 'streamed: the deltas make up the transcript');
  t.equal(deltas(streamed), deltas(theirStream), "streamed: the same deltas as llama-server's");
  t.match(streamed.at(-2), { type: 'transcript.text.done', text: jsonText, usage: { output_tokens: 8 } }, 'streamed: the done event last');
  t.equal(streamed.at(-1), '[DONE]');
  t.equal(theirStream.at(-1), '[DONE]');

  // OpenAI's other formats (llama-server refuses them: only json).
  const asText = await fetch(ours.base + '/v1/audio/transcriptions', transcriptionOf(wav(1), { temperature: '0', max_tokens: '8', response_format: 'text' }));
  t.equal(asText.status, 200);
  t.match(asText.headers.get('content-type'), /^text\/plain/);
  t.equal(await asText.text(), jsonText, 'response_format text: the transcript alone');
  const verbose = await answer(ours.base, '/v1/audio/transcriptions', transcriptionOf(wav(1), { temperature: '0', max_tokens: '8', response_format: 'verbose_json', language: 'en' })) as { body: any };
  t.match(verbose.body, { task: 'transcribe', language: 'en', duration: 1, text: jsonText, usage: { output_tokens: 8 } }, 'response_format verbose_json');
  t.equal((await answer(llama.base, '/v1/audio/transcriptions', transcriptionOf(wav(1), { response_format: 'text' }))).status, 400, 'llama-server: text is a 400');

  // Refusals, as llama-server's.
  const noFile = () => { const f = new FormData(); f.append('model', 'whisper-1'); return { method: 'POST', body: f }; };
  const [ourNoFile, theirNoFile] = await both('/v1/audio/transcriptions', noFile);
  t.match(ourNoFile, { status: 400, body: { error: { code: 400, message: 'No input file found for transcription', type: 'invalid_request_error' } } }, 'no file: 400');
  t.match(theirNoFile, { status: 400, body: { error: { message: 'No input file found for transcription' } } });
  const [ourFormat, theirFormat] = await both('/v1/audio/transcriptions', () => transcriptionOf(wav(1), { response_format: 'srt' }));
  t.same([ourFormat!.status, ourFormat!.body.error.type], [400, 'invalid_request_error'], 'response_format srt: 400');
  t.equal(theirFormat!.status, 400);
  const corrupt = Buffer.concat([Buffer.from('RIFF\x24\x00\x00\x00WAVEjunk', 'latin1'), Buffer.alloc(64, 7)]);
  const [ourCorrupt, theirCorrupt] = await both('/v1/chat/completions', () => chatWith(corrupt, 'wav'));
  t.equal(ourCorrupt!.status, theirCorrupt!.status, `a corrupt WAV: ${theirCorrupt!.status}, as llama-server`);
  t.equal(ourCorrupt!.body.error.type, theirCorrupt!.body.error.type);
  const jpeg = readFileSync(join(REPO_ROOT, 'vendor', 'llama.cpp', 'tools', 'mtmd', 'test-1.jpeg'));
  const imageChat = () => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${jpeg.toString('base64')}` } }] }], max_tokens: 4 }) });
  const [ourImage, theirImage] = await both('/v1/chat/completions', imageChat);
  t.same([ourImage!.status, ourImage!.body.error.type], [theirImage!.status, theirImage!.body.error.type], 'an image to an audio-only projector: refused as llama-server');
  t.match(ourImage!.body.error.message, /^image input is not supported/);
  // The server still answers.
  t.equal((await answer(ours.base, '/v1/chat/completions', text)).status, 200, 'the server answers after the refusals');
});

/** A FLAC file that is a header only: STREAMINFO declaring `samples` mono 16-bit samples at `rate` Hz, no frames. */
function flacHeader(rate: number, samples: number): Buffer {
  const info = Buffer.alloc(34);
  info.writeUInt16BE(4096, 0);
  info.writeUInt16BE(4096, 2);
  // 20 bits of rate, 3 of channels - 1 (0), 5 of bits per sample - 1 (15), 36 of total samples.
  info[10] = (rate >> 12) & 0xff;
  info[11] = (rate >> 4) & 0xff;
  info[12] = ((rate & 0x0f) << 4) | (0 << 1) | (15 >> 4);
  info[13] = ((15 & 0x0f) << 4) | Math.floor(samples / 2 ** 32);
  info.writeUInt32BE(samples % 2 ** 32, 14);
  return Buffer.concat([Buffer.from('fLaC'), Buffer.from([0x80, 0, 0, 34]), info]);
}

t.test('a clip of more than an hour is refused: a FLAC header declaring one before it is decoded (no buffer sized from its header), a WAV before its chunks are preprocessed', async (t) => {
  const ours = await startTestServer(models.chat, { ctxSize: 2048, parallel: 1, mmproj: await ensureAudioProjector(), maxBodyBytes: 32 << 20 });
  t.teardown(ours.close);
  for (const [what, bytes] of [['2 hours at 16 kHz', flacHeader(16000, 2 * 3600 * 16000)], ['2^35 samples at 1 Hz', flacHeader(1, 2 ** 35)]] as const) {
    const res = await answer(ours.base, '/v1/chat/completions', chatWith(bytes, 'flac'));
    t.same(res, { status: 400, body: { error: { code: 400, message: 'audio clip 0 is longer than an hour', type: 'invalid_request_error' } } }, what);
  }
  // A WAV's length is the samples it holds: 3,625 s at 4 kHz in 8 bits (14.5 MB) is decoded, then refused before its 121 chunks are preprocessed.
  const rate = 4000;
  const samples = 3625 * rate;
  const long = Buffer.alloc(44 + samples, 0x80);
  long.write('RIFF', 0); long.writeUInt32LE(36 + samples, 4); long.write('WAVEfmt ', 8); long.writeUInt32LE(16, 16); long.writeUInt16LE(1, 20); long.writeUInt16LE(1, 22);
  long.writeUInt32LE(rate, 24); long.writeUInt32LE(rate, 28); long.writeUInt16LE(1, 32); long.writeUInt16LE(8, 34); long.write('data', 36); long.writeUInt32LE(samples, 40);
  t.same(await answer(ours.base, '/v1/audio/transcriptions', transcriptionOf(long, {})), { status: 400, body: { error: { code: 400, message: 'audio clip 0 is longer than an hour', type: 'invalid_request_error' } } }, 'a WAV of an hour and a minute');
  // An MP3's length is its frames': 4.7 hours of 8 kbit/s frames (16 MB, each 72 bytes of a silent
  // MPEG-2.5 layer III frame at 8 kHz) is refused from its frame headers, before decoding it would
  // have taken a gigabyte of samples at 16 kHz; the process's peak memory shows it was not decoded.
  const frame = Buffer.alloc(72);
  frame.set([0xff, 0xe3, 0x18, 0xc0]);
  const hours = Buffer.concat([Buffer.from('ID3\x03\x00\x00\x00\x00\x00\x00', 'latin1'), ...Array.from({ length: Math.ceil((16 << 20) / 72) }, () => frame)]);
  const peakBefore = resetPeakRss();
  t.same(await answer(ours.base, '/v1/chat/completions', chatWith(hours, 'mp3')), { status: 400, body: { error: { code: 400, message: 'audio clip 0 is longer than an hour', type: 'invalid_request_error' } } }, 'an MP3 of 4.7 hours');
  t.ok(peakBefore > 0 && peakRssBytes() - peakBefore < 400 << 20, `peak memory grew by ${((peakRssBytes() - peakBefore) / 2 ** 20).toFixed(0)} MiB, under the 1 GiB its samples would take`);
  t.equal((await answer(ours.base, '/v1/chat/completions', chatWith(wav(0.5), 'wav'))).status, 200, 'the server answers the next clip');
  const malformed = await answer(ours.base, '/v1/audio/transcriptions', { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=xyz' }, body: 'not a form' });
  t.match(malformed, { status: 400, body: { error: { code: 400, message: /^Invalid multipart body: /, type: 'invalid_request_error' } } }, 'a malformed form: 400');
});

/** This process's peak resident memory (VmHWM), in bytes; the servers under test run in it. */
function peakRssBytes(): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Resets this process's peak resident memory to its resident memory now (Linux: 5 to /proc/self/clear_refs); returns it. */
function resetPeakRss(): number {
  writeFileSync('/proc/self/clear_refs', '5');
  return peakRssBytes();
}
