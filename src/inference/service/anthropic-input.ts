// An Anthropic Messages request -> the fields of an OpenAI chat request, rule for rule as
// llama-server's server_chat_convert_anthropic_to_oai: system (a string or text blocks) first;
// per message, text and image blocks as content parts, thinking blocks as reasoning_content,
// tool_use blocks as tool_calls and tool_result blocks as the tool messages that follow;
// tools with input_schema as functions; tool_choice auto -> "auto", any -> "required";
// stop_sequences -> stop; max_tokens 4096 when absent; thinking.enabled ->
// thinking_budget_tokens. Blocks of other types are dropped. Two choices follow Anthropic where
// llama-server does not: tool_choice "tool" forces the tool it names (llama-server: any tool),
// so an unknown name is a 400, and "none" allows no call (llama-server: the default, auto).
import type { AnthropicBlock, AnthropicMessagesBody } from '../schemas.js';

type ChatFields = Record<string, unknown>;
type Part = Record<string, unknown>;

/** Anthropic's image source as an OpenAI image_url part (base64 bytes as a data URL). */
function imagePart(source: AnthropicBlock['source']): Part | null {
  if (source?.type === 'base64') return { type: 'image_url', image_url: { url: `data:${source.media_type ?? 'image/jpeg'};base64,${source.data ?? ''}` } };
  if (source?.type === 'url') return { type: 'image_url', image_url: { url: source.url ?? '' } };
  return null;
}

/** A tool_result block as a tool message: text only collapses to a string, with images it stays parts. */
function toolMessage(block: AnthropicBlock): ChatFields {
  const base = { role: 'tool', tool_call_id: block.tool_use_id ?? '' };
  const content = block.content;
  if (typeof content === 'string') return { ...base, content };
  if (!Array.isArray(content)) return { ...base, content: '' };
  const parts: Part[] = [];
  let text = '';
  let images = false;
  for (const c of content) {
    if (c.type === 'text') {
      text += c.text ?? '';
      parts.push({ type: 'text', text: c.text ?? '' });
    } else if (c.type === 'image') {
      images = true;
      const part = imagePart(c.source);
      if (part) parts.push(part);
    }
  }
  return { ...base, content: images ? parts : text };
}

/** One message of blocks -> its chat message (when it has anything) and its tool results. */
function blockMessages(role: string, blocks: readonly AnthropicBlock[]): ChatFields[] {
  const content: Part[] = [];
  const toolCalls: Part[] = [];
  const results: ChatFields[] = [];
  let reasoning = '';
  for (const block of blocks) {
    switch (block.type) {
      case 'text': content.push(block); break;
      case 'thinking': reasoning += block.thinking ?? ''; break;
      case 'image': {
        const part = imagePart(block.source);
        if (part) content.push(part);
        break;
      }
      case 'tool_use':
        toolCalls.push({ id: block.id ?? '', type: 'function', function: { name: block.name ?? '', arguments: JSON.stringify(block.input ?? {}) } });
        break;
      case 'tool_result': results.push(toolMessage(block)); break;
    }
  }
  const messages: ChatFields[] = [];
  if (content.length > 0 || toolCalls.length > 0 || reasoning !== '') {
    messages.push({
      role,
      content: content.length > 0 ? content : '',
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      ...(reasoning !== '' ? { reasoning_content: reasoning } : {}),
    });
  }
  return [...messages, ...results];
}

function systemText(system: AnthropicMessagesBody['system']): string | null {
  if (system === undefined || system === null) return null;
  if (typeof system === 'string') return system;
  return system.filter((b) => b.type === 'text').map((b) => b.text ?? '').join('');
}

export function anthropicToChat(body: AnthropicMessagesBody): ChatFields {
  const messages: ChatFields[] = [];
  const system = systemText(body.system);
  if (system !== null) messages.push({ role: 'system', content: system });
  for (const m of body.messages) {
    if (m.content === undefined) {
      if (m.role !== 'assistant') messages.push({ role: m.role });
    } else if (typeof m.content === 'string') {
      messages.push({ role: m.role, content: m.content });
    } else {
      messages.push(...blockMessages(m.role, m.content));
    }
  }
  const chat: ChatFields = { messages, max_tokens: body.max_tokens ?? 4096 };
  if (body.tools) {
    chat.tools = body.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description ?? '', parameters: t.input_schema ?? {} } }));
  }
  if (body.tool_choice?.type === 'auto') chat.tool_choice = 'auto';
  else if (body.tool_choice?.type === 'any') chat.tool_choice = 'required';
  else if (body.tool_choice?.type === 'none') chat.tool_choice = 'none';
  else if (body.tool_choice?.type === 'tool') chat.tool_choice = { type: 'function', function: { name: body.tool_choice.name ?? '' } };
  if (body.stop_sequences) chat.stop = body.stop_sequences;
  for (const key of ['temperature', 'top_p', 'top_k', 'stream', 'chat_template_kwargs'] as const) {
    if (body[key] !== undefined) chat[key] = body[key];
  }
  if (body.thinking?.type === 'enabled') chat.thinking_budget_tokens = body.thinking.budget_tokens ?? 10000;
  return chat;
}
