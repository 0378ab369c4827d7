// Chat messages -> prompt text with the model's own Jinja chat template. Image parts become the
// projector's media marker in the text, their bytes collected in order.
import type { ChatMessageText } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import type { ChatMessage } from '../schemas.js';
import { loadImage, type MediaPolicy } from './media.js';
import type { InferenceService } from './service.js';

export interface RenderedChat {
  prompt: string;
  /** Encoded images, one per media marker in `prompt`. */
  media: Uint8Array[];
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
      media.push(await loadImage(url, field, policy));
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
