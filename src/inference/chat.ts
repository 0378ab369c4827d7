// Chat messages -> prompt text with the model's own Jinja chat template.
import type { ChatMessageText } from '../native/binding.js';
import { badRequest } from './errors.js';
import type { ChatMessage } from './schemas.js';
import type { InferenceService } from './service.js';

/** Flattens message content to text. Image parts need a multimodal projector (none loaded). */
export function textMessages(messages: readonly ChatMessage[], field = 'messages'): ChatMessageText[] {
  return messages.map((m, i) => {
    if (m.content === undefined || m.content === null) return { role: m.role, content: '' };
    if (typeof m.content === 'string') return { role: m.role, content: m.content };
    const texts: string[] = [];
    for (const part of m.content) {
      if (part.type === 'image_url') {
        throw badRequest(`${field}[${i}] has an image part, but the server was started without a multimodal projector (-mm)`, { field: `${field}[${i}].content` });
      }
      texts.push(part.text);
    }
    return { role: m.role, content: texts.join('\n') };
  });
}

export function renderChat(
  service: InferenceService,
  messages: readonly ChatMessage[],
  options: { addGenerationPrompt?: boolean; kwargs?: Record<string, unknown> } = {},
): string {
  const kwargs = Object.fromEntries(Object.entries(options.kwargs ?? {}).map(([k, v]) => [k, JSON.stringify(v)]));
  try {
    return service.model.applyChatTemplate(textMessages(messages), { addGenerationPrompt: options.addGenerationPrompt ?? true, kwargs });
  } catch (err) {
    throw badRequest((err as Error).message);
  }
}
