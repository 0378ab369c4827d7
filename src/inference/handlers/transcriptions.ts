// POST /v1/audio/transcriptions (and /audio/transcriptions): OpenAI's transcription upload, run
// as llama-server runs it: as the chat it stands for (service/transcription-input.ts), generated
// by the model through its audio projector. Answers in llama-server's shapes:
// {type: "transcript.text.done", text, usage}, or, streamed, one transcript.text.delta event per
// piece and the done event, then [DONE].
// response_format "text" and "verbose_json" (OpenAI's; llama-server refuses them) are ours.
import { readMultipartForm } from '../../http/multipart.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import { badRequest, ErrorType, inferenceError } from '../errors.js';
import { ChatOutput } from '../service/chat-output.js';
import { chatTaskSpec, renderChatRequest } from '../service/chat-task.js';
import { transcriptionToChat } from '../service/transcription-input.js';
import { ChatBody } from './chat-completions.js';
import { streamTasks } from './streaming.js';
import type { Admitted } from '../guards.js';

const FORMATS = ['json', 'text', 'verbose_json'] as const;
type TranscriptFormat = (typeof FORMATS)[number];

/** A form field that must hold a number, or undefined when absent. */
function numberField(form: FormData, name: string, integer: boolean): number | undefined {
  const value = form.get(name);
  if (value === null) return undefined;
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
  if (!Number.isFinite(n) || (integer && (!Number.isInteger(n) || n < 0))) {
    throw badRequest(`Invalid field "${name}": expected ${integer ? 'a non-negative integer' : 'a number'}`, { field: name });
  }
  return n;
}

function textField(form: FormData, name: string): string | undefined {
  const value = form.get(name);
  return typeof value === 'string' ? value : undefined;
}

/** Seconds of audio in a PCM WAV file, from its header; undefined for anything else. */
function wavDuration(bytes: Uint8Array): number | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < 12 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') return undefined;
  let byteRate = 0;
  for (let at = 12; at + 8 <= b.length;) {
    const id = b.toString('latin1', at, at + 4);
    const size = b.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 16 <= b.length) byteRate = b.readUInt32LE(at + 16);
    if (id === 'data') return byteRate > 0 ? Math.min(size, b.length - at - 8) / byteRate : undefined;
    at += 8 + size + (size % 2);
  }
  return undefined;
}

function transcriptUsage(outcome: CompletionOutcome): Record<string, unknown> {
  return {
    type: 'tokens',
    input_tokens: outcome.nPrompt,
    output_tokens: outcome.nPredicted,
    total_tokens: outcome.nPrompt + outcome.nPredicted,
    input_tokens_details: { cached_tokens: outcome.nCached },
  };
}

export async function handleTranscriptions({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  if (!service.vision?.supportsAudio) throw inferenceError(ErrorType.NOT_SUPPORTED, 'The current model does not support audio input.');
  // Any other body has no file, as llama-server answers it.
  const form = await readMultipartForm(req);
  const file = form?.get('file');
  if (!form || !(file instanceof Blob)) throw badRequest('No input file found for transcription', { field: 'file' });
  const format = (textField(form, 'response_format') ?? 'json') as TranscriptFormat;
  if (!FORMATS.includes(format)) throw badRequest(`Invalid field "response_format": must be one of ${FORMATS.join(', ')}`, { field: 'response_format' });
  const audio = new Uint8Array(await file.arrayBuffer());
  const language = textField(form, 'language') ?? '';
  const fields = { audio, prompt: textField(form, 'prompt') ?? '', language, maxTokens: numberField(form, 'max_tokens', true), temperature: numberField(form, 'temperature', false) };
  const body = ChatBody.check(transcriptionToChat(fields, service.settings.chatTemplate ?? service.metadata.chatTemplate ?? ''));
  const chat = await renderChatRequest(service, body);
  const spec = await chatTaskSpec(service, body, chat, undefined);

  if (textField(form, 'stream') !== 'true') {
    const [outcome] = await service.runAll([spec], req.signal, tenant);
    const text = new ChatOutput(chat).message(outcome!.content).content;
    if (format === 'text') return { text };
    if (format === 'verbose_json') {
      return { body: { task: 'transcribe', language: language || 'unknown', duration: wavDuration(audio) ?? null, text, usage: transcriptUsage(outcome!) } };
    }
    return { body: { type: 'transcript.text.done', text, usage: transcriptUsage(outcome!) } };
  }

  await streamTasks(req, { service, tenant }, [spec], {
    tokens: () => (batch: GeneratedToken[]) => {
      const delta = batch.map((t) => t.text).join('');
      return delta ? JSON.stringify({ type: 'transcript.text.delta', delta }) : null;
    },
    closing: (outcome) => JSON.stringify({ type: 'transcript.text.done', text: new ChatOutput(chat).message(outcome.content).content, usage: transcriptUsage(outcome) }),
    final: () => ['[DONE]'],
  });
}
