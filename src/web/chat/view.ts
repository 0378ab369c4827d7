// Rendering of the conversation list and of the messages. Message text is rendered as Markdown
// into DOM nodes (markdown.ts); nothing from a message is ever parsed as HTML.
import type { AudioClip, ChatMessage, Conversation } from './conversations.js';
import { renderMarkdown } from './markdown.js';

export interface ListActions {
  open(id: string): void;
  remove(id: string): void;
}

export function renderConversationList(list: HTMLUListElement, conversations: readonly Conversation[], currentId: string | null, actions: ListActions): void {
  list.replaceChildren(...conversations.map((conversation) => {
    const item = document.createElement('li');
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'conversation';
    open.textContent = conversation.title;
    if (conversation.id === currentId) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => actions.open(conversation.id));
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'delete';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Delete conversation “${conversation.title}”`);
    remove.addEventListener('click', () => actions.remove(conversation.id));
    item.append(open, remove);
    return item;
  }));
}

export function renderMessages(list: HTMLOListElement, messages: readonly ChatMessage[]): void {
  list.replaceChildren(...messages.map((message) => {
    const item = document.createElement('li');
    fillMessage(item, message);
    return item;
  }));
  document.getElementById('empty-hint')!.hidden = messages.length > 0;
}

/** (Re)draws one message into its list item; called on every streamed chunk of an answer. */
export function fillMessage(item: HTMLElement, message: ChatMessage): void {
  item.className = `message ${message.role}`;
  const who = document.createElement('span');
  who.className = 'who';
  who.textContent = message.role === 'user' ? 'You' : 'Assistant';
  const parts: Node[] = [who];
  if (message.reasoning) parts.push(reasoningBlock(message.reasoning));
  const body = document.createElement('div');
  body.className = 'body';
  body.append(renderMarkdown(message.content));
  parts.push(body);
  for (const call of message.toolCalls ?? []) parts.push(toolCallBlock(call));
  if (message.images?.length) parts.push(imageStrip(message.images));
  if (message.audio?.length) parts.push(audioList(message.audio));
  const note = messageNote(message);
  if (note) parts.push(note);
  item.replaceChildren(...parts);
}

function reasoningBlock(text: string): HTMLElement {
  const details = document.createElement('details');
  details.className = 'reasoning';
  const summary = document.createElement('summary');
  summary.textContent = 'Reasoning';
  const body = document.createElement('div');
  body.append(renderMarkdown(text));
  details.append(summary, body);
  return details;
}

function toolCallBlock(call: { name: string; arguments: string }): HTMLElement {
  const block = document.createElement('div');
  block.className = 'tool-call';
  const title = document.createElement('strong');
  title.textContent = `Tool call: ${call.name}`;
  const args = document.createElement('pre');
  args.textContent = call.arguments;
  block.append(title, args);
  return block;
}

function imageStrip(images: string[]): HTMLElement {
  const strip = document.createElement('div');
  strip.className = 'images';
  images.forEach((url, i) => {
    const img = document.createElement('img');
    img.src = url;
    img.alt = `Attached image ${i + 1}`;
    strip.append(img);
  });
  return strip;
}

/** One player per clip, captioned with its file name. */
function audioList(clips: AudioClip[]): HTMLElement {
  const list = document.createElement('div');
  list.className = 'audio';
  clips.forEach((clip, i) => {
    const figure = document.createElement('figure');
    const player = document.createElement('audio');
    player.controls = true;
    player.preload = 'metadata';
    player.src = clip.data;
    const caption = document.createElement('figcaption');
    caption.textContent = clip.name ?? `Audio ${i + 1} (${clip.format.toUpperCase()})`;
    player.setAttribute('aria-label', `Attached audio: ${caption.textContent}`);
    figure.append(player, caption);
    list.append(figure);
  });
  return list;
}

function messageNote(message: ChatMessage): HTMLElement | null {
  const notes: string[] = [];
  if (message.stats) notes.push(`${message.stats.tokens} tokens · ${message.stats.perSecond.toFixed(1)} tokens/s`);
  if (message.stopped) notes.push('stopped');
  if (message.error) notes.push(`error: ${message.error}`);
  if (notes.length === 0) return null;
  const note = document.createElement('p');
  note.className = message.error ? 'note error' : 'note';
  note.textContent = notes.join(' · ');
  return note;
}
