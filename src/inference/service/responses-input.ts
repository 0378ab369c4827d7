// An OpenAI Responses request -> the chat-completions body it stands for, as llama-server's
// server_chat_convert_responses_to_chatcmpl converts it: instructions become a system message,
// input (a string or a list of items: messages with input_text/input_image parts, assistant
// output messages, function_call, function_call_output and reasoning items) becomes messages,
// Responses tools become chat tools, max_output_tokens max_tokens, reasoning.effort
// reasoning_effort. Every other field passes through. A shape it cannot convert is a 400
// naming the field.
import { badRequest } from '../errors.js';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';

function invalid(field: string, message: string): never {
  throw badRequest(`Invalid field "${field}": ${message}`, { field });
}

/** An input message's parts (input_text, input_image) as chat content parts. */
function inputParts(parts: unknown[], field: string): Json[] {
  return parts.map((part, j) => {
    const at = `${field}[${j}]`;
    const type = isObject(part) ? part.type : undefined;
    if (type === 'input_text') {
      if (!isObject(part) || !('text' in part)) invalid(at, "'Input text' requires 'text'");
      return { text: part.text, type: 'text' };
    }
    if (type === 'input_image') {
      // `detail` is required by the API but has a default ("auto"): it may be left out.
      if (!isObject(part) || !('image_url' in part)) invalid(at, "'image_url' is required");
      return { image_url: { url: part.image_url }, type: 'image_url' };
    }
    if (type === 'input_file') invalid(at, "'input_file' is not supported by llamacpp at this moment");
    return invalid(at, "'type' must be one of 'input_text', 'input_image', or 'input_file'");
  });
}

/** An assistant output message's content (a string, or output_text/refusal parts) as chat content parts. */
function outputParts(content: unknown, field: string): Json[] {
  if (isString(content)) return [{ text: content, type: 'text' }];
  if (!Array.isArray(content)) return [];
  return content.map((part, j) => {
    const at = `${field}[${j}]`;
    const type = isObject(part) ? part.type : undefined;
    if (type === 'output_text' || type === 'input_text') {
      if (!isObject(part) || !isString(part.text)) invalid(at, "'Output text' requires 'text'");
      return { text: part.text, type: 'text' };
    }
    if (type === 'refusal') {
      if (!isObject(part) || !isString(part.refusal)) invalid(at, "'Refusal' requires 'refusal'");
      return { refusal: part.refusal, type: 'refusal' };
    }
    return invalid(at, "'type' must be one of 'output_text' or 'refusal'");
  });
}

/** function_call_output's list form: input_text and input_image parts. */
function toolOutputParts(output: unknown[], field: string): Json[] {
  return output.map((part, j) => {
    const at = `${field}[${j}]`;
    if (!isObject(part) || !('type' in part)) invalid(at, "Output of tool call missing 'type' field");
    if (part.type === 'input_text') return { ...part, type: 'text' };
    if (part.type !== 'input_image') invalid(at, "Output of tool call should be 'Input text' or 'Input image'");
    if (!('image_url' in part)) invalid(at, "'image_url' is required");
    return { ...part, type: 'image_url', image_url: { url: part.image_url } };
  });
}

const INPUT_ROLES = new Set(['user', 'system', 'developer']);

/** Appends the chat message(s) of input item `i`; assistant parts merge into a preceding assistant message. */
function convertItem(raw: unknown, i: number, messages: Json[]): void {
  const field = `input[${i}]`;
  if (!isObject(raw)) invalid(field, "Cannot determine type of 'item'");
  const item: Json = { ...raw };
  const last = messages.at(-1);
  const previous = last?.role === 'assistant' ? last : undefined;
  // An input message's string content is one input_text part.
  if (isString(item.content)) item.content = [{ text: item.content, type: 'input_text' }];

  if (Array.isArray(item.content) && isString(item.role) && INPUT_ROLES.has(item.role)) {
    const { type: _type, status: _status, ...message } = item;
    messages.push({ ...message, content: inputParts(item.content, `${field}.content`) });
  } else if (item.role === 'assistant' && item.type === 'message') {
    const content = outputParts(raw.content, `${field}.content`);
    if (previous) {
      previous.content = [...(Array.isArray(previous.content) ? previous.content : []), ...content];
    } else {
      const { type: _type, status: _status, ...message } = item;
      messages.push({ ...message, content });
    }
  } else if (item.type === 'function_call' && isString(item.arguments) && isString(item.call_id) && isString(item.name)) {
    const call = { function: { arguments: item.arguments, name: item.name }, id: item.call_id, type: 'function' };
    if (previous) previous.tool_calls = [...(Array.isArray(previous.tool_calls) ? previous.tool_calls : []), call];
    else messages.push({ role: 'assistant', tool_calls: [call] });
  } else if (item.type === 'function_call_output' && isString(item.call_id) && (isString(item.output) || Array.isArray(item.output))) {
    const content = isString(item.output) ? item.output : toolOutputParts(item.output, `${field}.output`);
    messages.push({ content, role: 'tool', tool_call_id: item.call_id });
  } else if (item.type === 'reasoning' && Array.isArray(item.summary)) {
    if (!Array.isArray(item.content)) invalid(`${field}.content`, "item['content'] is not an array");
    if (item.content.length === 0) invalid(`${field}.content`, "item['content'] is empty");
    const first: unknown = item.content[0];
    if (!isObject(first) || !isString(first.text)) invalid(`${field}.content[0].text`, "item['content']['text'] is not a string");
    if (previous) previous.reasoning_content = first.text;
    else messages.push({ role: 'assistant', content: [], reasoning_content: first.text });
  } else {
    invalid(field, "Cannot determine type of 'item'");
  }
}

/** Responses tools ({type:"function", name, ...}) as chat tools; other tool types have no chat form and are left out. */
function convertTools(tools: unknown): Json[] {
  if (!Array.isArray(tools)) invalid('tools', "'tools' must be an array of objects");
  return tools.filter((t): t is Json => isObject(t) && t.type === 'function').map(({ type: _type, ...fn }) => ({
    type: 'function',
    function: { ...fn, strict: fn.strict ?? true },
  }));
}

/** The Responses API's named tool choice ({type:"function", name}) in the chat shape; the rest as it is. */
function convertToolChoice(choice: unknown): unknown {
  if (isObject(choice) && choice.type === 'function' && isString(choice.name)) return { type: 'function', function: { name: choice.name } };
  return choice;
}

/** The chat-completions body of a Responses request (unvalidated: the chat schema checks it next). */
export function responsesToChat(body: unknown): Json {
  if (!isObject(body)) throw badRequest('Invalid request body: a JSON object is required');
  if (!('input' in body)) throw badRequest("'input' is required", { field: 'input' });
  if (isString(body.previous_response_id) && body.previous_response_id !== '') {
    throw badRequest("llama.cpp does not support 'previous_response_id'.", { field: 'previous_response_id' });
  }
  const { input, instructions, tools, max_output_tokens, reasoning, ...chat } = body;
  const messages: Json[] = [];
  if (instructions !== undefined) messages.push({ role: 'system', content: isString(instructions) ? instructions : '' });
  if (isString(input)) messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) input.forEach((item, i) => convertItem(item, i, messages));
  else invalid('input', "'input' must be a string or array of objects");
  chat.messages = messages;
  if (tools !== undefined) {
    const chatTools = convertTools(tools);
    if (chatTools.length > 0) chat.tools = chatTools;
  }
  if ('tool_choice' in chat) chat.tool_choice = convertToolChoice(chat.tool_choice);
  if (max_output_tokens !== undefined) chat.max_tokens = max_output_tokens;
  if (isObject(reasoning) && 'effort' in reasoning) chat.reasoning_effort = reasoning.effort;
  return chat;
}
