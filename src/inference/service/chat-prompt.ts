// Chat messages -> prompt text with the model's own Jinja chat template. Image parts become the
// projector's media marker in the text, their bytes collected in order.
import type { ChatMessageText } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import type { ChatMessage } from '../schemas.js';
import type { InferenceService } from './service.js';

/** Largest accepted image file. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

export interface RenderedChat {
  prompt: string;
  /** Encoded images, one per media marker in `prompt`. */
  media: Uint8Array[];
}

export interface MediaPolicy {
  /** Fetch http(s) image URLs (--media-allow-remote); off by default. */
  allowRemote: boolean;
}

/** Decodes `data:image/...;base64,...` (the decoder sniffs the real format from the bytes). */
export function decodeDataUrl(url: string, field: string): Uint8Array {
  const m = /^data:([\w.+/-]*)(;[\w=.+-]+)*;base64,/i.exec(url);
  if (!m) throw badRequest(`Invalid field "${field}": expected a base64 data URL (data:image/png;base64,...)`, { field });
  const bytes = Buffer.from(url.slice(m[0].length), 'base64');
  if (bytes.length === 0) throw badRequest(`Invalid field "${field}": the image is empty`, { field });
  if (bytes.length > MAX_IMAGE_BYTES) throw badRequest(`Invalid field "${field}": the image is larger than ${MAX_IMAGE_BYTES} bytes`, { field });
  return bytes;
}

async function fetchImage(url: string, field: string, policy: MediaPolicy): Promise<Uint8Array> {
  if (!policy.allowRemote) {
    throw badRequest(`Invalid field "${field}": remote image URLs are not allowed (start the server with --media-allow-remote); send a base64 data URL`, { field });
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > MAX_IMAGE_BYTES) throw new Error(`larger than ${MAX_IMAGE_BYTES} bytes`);
    return bytes;
  } catch (err) {
    throw badRequest(`Invalid field "${field}": could not fetch the image (${(err as Error).message})`, { field });
  }
}

async function flatten(service: InferenceService, messages: readonly ChatMessage[], policy: MediaPolicy): Promise<{ messages: ChatMessageText[]; media: Uint8Array[] }> {
  const media: Uint8Array[] = [];
  const out: ChatMessageText[] = [];
  for (const [i, m] of messages.entries()) {
    if (m.content === undefined || m.content === null) {
      out.push({ role: m.role, content: '' });
      continue;
    }
    if (typeof m.content === 'string') {
      out.push({ role: m.role, content: m.content });
      continue;
    }
    const texts: string[] = [];
    for (const [j, part] of m.content.entries()) {
      if (part.type === 'text') {
        texts.push(part.text);
        continue;
      }
      const field = `messages[${i}].content[${j}].image_url.url`;
      if (!service.vision) {
        throw badRequest(`messages[${i}] has an image part, but the server was started without a multimodal projector (-mm)`, { field: `messages[${i}].content` });
      }
      const url = part.image_url.url;
      media.push(/^https?:\/\//i.test(url) ? await fetchImage(url, field, policy) : decodeDataUrl(url, field));
      texts.push(service.vision.marker);
    }
    out.push({ role: m.role, content: texts.join('\n') });
  }
  return { messages: out, media };
}

export async function renderChat(
  service: InferenceService,
  messages: readonly ChatMessage[],
  options: { addGenerationPrompt?: boolean; kwargs?: Record<string, unknown>; media?: MediaPolicy } = {},
): Promise<RenderedChat> {
  const { messages: flat, media } = await flatten(service, messages, options.media ?? { allowRemote: false });
  // A request's chat_template_kwargs override the server's (--chat-template-kwargs), key by key.
  const merged = { ...service.settings.templateKwargs, ...options.kwargs };
  const kwargs = Object.fromEntries(Object.entries(merged).map(([k, v]) => [k, JSON.stringify(v)]));
  const template = service.settings.chatTemplate;
  try {
    return { prompt: service.model.applyChatTemplate(flat, { addGenerationPrompt: options.addGenerationPrompt ?? true, kwargs, ...(template ? { template } : {}) }), media };
  } catch (err) {
    throw badRequest((err as Error).message);
  }
}
