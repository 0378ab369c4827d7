// The chat page: connects to the server (asking for the API key when it answers 401), streams
// answers from /v1/chat/completions into the open conversation, and stops them on request
// (aborting the fetch closes the connection; the server cancels the task and frees its slot).
import { InferenceApi, KeyRequired, Loading, type Delta, type Props } from './api.js';
import { ConversationStore, type ChatMessage, type Conversation } from './conversations.js';
import { SettingsForm } from './settings.js';
import { StatusPanel } from './status.js';
import { fillMessage, renderConversationList, renderMessages } from './view.js';

const byId = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;

const api = new InferenceApi();
const store = new ConversationStore();
const settings = new SettingsForm(byId<HTMLFormElement>('settings'));
// A 401 while polling (the server's keys changed): ask again, then resume polling.
const status: StatusPanel = new StatusPanel(api, () => void askForKey().then(() => status.refresh()));
const promptInput = byId<HTMLTextAreaElement>('prompt');
const messageList = byId<HTMLOListElement>('messages');
let conversation: Conversation | null = store.get(store.currentId()) ?? null;
let attachments: string[] = [];
let running: AbortController | null = null;

function redraw(): void {
  renderConversationList(byId<HTMLUListElement>('conversation-list'), store.list(), conversation?.id ?? null, {
    open: (id) => { conversation = store.get(id) ?? null; store.setCurrent(id); redraw(); promptInput.focus(); },
    remove: (id) => {
      if (conversation?.id === id) { running?.abort(); conversation = null; }
      store.delete(id);
      redraw();
      byId('new-chat').focus();
    },
  });
  renderMessages(messageList, conversation?.messages ?? []);
}

function setConnection(text: string): void {
  byId('connection').textContent = text;
}

function setRunning(on: boolean): void {
  byId<HTMLButtonElement>('send').disabled = on;
  byId<HTMLButtonElement>('stop').disabled = !on;
}

let keyPrompt: Promise<void> | null = null;

/** Shows the key dialog until the server accepts a key (Escape does not close it: nothing works without one). */
function askForKey(): Promise<void> {
  keyPrompt ??= new Promise<void>((resolve) => {
    const dialog = byId<HTMLDialogElement>('key-dialog');
    const form = byId<HTMLFormElement>('key-form');
    const input = byId<HTMLInputElement>('api-key');
    const error = byId('key-error');
    error.textContent = '';
    const submit = async (event: SubmitEvent): Promise<void> => {
      event.preventDefault();
      api.setKey(input.value.trim());
      try {
        await api.props();
      } catch (thrown) {
        if (thrown instanceof KeyRequired) {
          error.textContent = 'The server refused this key.';
          input.select();
          return;
        }
      }
      form.removeEventListener('submit', submit);
      input.value = '';
      dialog.close();
      keyPrompt = null;
      resolve();
    };
    form.addEventListener('submit', submit);
    dialog.addEventListener('cancel', (event) => event.preventDefault());
    dialog.showModal();
    input.focus();
  });
  return keyPrompt;
}

async function connect(): Promise<void> {
  for (;;) {
    try {
      onConnected(await api.props());
      return;
    } catch (error) {
      if (error instanceof KeyRequired) {
        setConnection('API key required');
        await askForKey();
        continue;
      }
      setConnection(error instanceof Loading ? 'Loading model…' : `Cannot reach the server (${(error as Error).message}); retrying`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

function onConnected(props: Props): void {
  setConnection('Connected');
  status.showModel(props);
  settings.showDefaults(props.default_generation_settings?.params);
  byId('attach-label').hidden = !props.modalities?.vision;
  promptInput.disabled = false;
  setRunning(false);
  status.start();
  promptInput.focus();
}

/** The conversation as the API's messages: the system prompt first, images as image_url parts. */
function apiMessages(messages: readonly ChatMessage[]): unknown[] {
  const out: unknown[] = settings.systemPrompt ? [{ role: 'system', content: settings.systemPrompt }] : [];
  for (const m of messages) {
    if (m.role === 'assistant' && (m.error || m.content === '')) continue;
    out.push(m.images?.length
      ? { role: m.role, content: [{ type: 'text', text: m.content }, ...m.images.map((url) => ({ type: 'image_url', image_url: { url } }))] }
      : { role: m.role, content: m.content });
  }
  return out;
}

function applyDelta(answer: ChatMessage, delta: Delta): void {
  if (delta.content) answer.content += delta.content;
  if (delta.reasoning) answer.reasoning = (answer.reasoning ?? '') + delta.reasoning;
  for (const call of delta.toolCalls ?? []) {
    answer.toolCalls ??= [];
    const entry = (answer.toolCalls[call.index] ??= { name: '', arguments: '' });
    entry.name += call.name ?? '';
    entry.arguments += call.arguments ?? '';
  }
  if (delta.timings) {
    answer.stats = { tokens: delta.timings.predicted_n, perSecond: delta.timings.predicted_per_second };
    status.showLastAnswer(answer.stats.tokens, answer.stats.perSecond, false);
  }
}

async function send(): Promise<void> {
  const text = promptInput.value.trim();
  if ((text === '' && attachments.length === 0) || running) return;
  const target = (conversation ??= store.create());
  target.messages.push({ role: 'user', content: text, ...(attachments.length ? { images: attachments } : {}) });
  const request = { messages: apiMessages(target.messages), ...settings.requestFields(), cache_prompt: true };
  const answer: ChatMessage = { role: 'assistant', content: '' };
  target.messages.push(answer);
  promptInput.value = '';
  setAttachments([]);
  store.touch(target);
  redraw();
  const item = messageList.lastElementChild as HTMLElement;
  item.setAttribute('aria-busy', 'true');
  const controller = (running = new AbortController());
  setRunning(true);
  void status.refresh();
  let frame = 0;
  const draw = (): void => {
    frame = 0;
    fillMessage(item, answer);
    item.scrollIntoView({ block: 'end' });
  };
  try {
    await api.streamChat(request, controller.signal, (delta) => {
      applyDelta(answer, delta);
      frame ||= requestAnimationFrame(draw);
    });
  } catch (error) {
    if (controller.signal.aborted) answer.stopped = true;
    else if (error instanceof KeyRequired) { answer.error = 'API key required'; void askForKey(); }
    else answer.error = (error as Error).message;
  }
  cancelAnimationFrame(frame);
  running = null;
  setRunning(false);
  if (answer.stopped) byId('status-last').textContent = `stopped after ${answer.content.length} characters`;
  item.removeAttribute('aria-busy');
  fillMessage(item, answer);
  if (!store.touch(target)) setConnection('Connected (images too large to keep in this browser)');
  if (conversation === target) redraw();
  void status.refresh();
}

function setAttachments(images: string[]): void {
  attachments = images;
  byId<HTMLUListElement>('attachments').replaceChildren(...images.map((url, i) => {
    const item = document.createElement('li');
    const img = document.createElement('img');
    img.src = url;
    img.alt = `Image ${i + 1} to send`;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Remove image ${i + 1}`);
    remove.addEventListener('click', () => setAttachments(attachments.filter((_, j) => j !== i)));
    item.append(img, remove);
    return item;
  }));
}

function readAsDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function wireEvents(): void {
  byId<HTMLFormElement>('composer').addEventListener('submit', (event) => { event.preventDefault(); void send(); });
  promptInput.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) { event.preventDefault(); void send(); }
  });
  byId('stop').addEventListener('click', () => running?.abort());
  byId('new-chat').addEventListener('click', () => {
    if (conversation?.messages.length !== 0) conversation = store.create();
    redraw();
    promptInput.focus();
  });
  byId('reset-settings').addEventListener('click', () => settings.reset());
  const attach = byId<HTMLInputElement>('attach');
  attach.addEventListener('change', async () => {
    const added = await Promise.all([...(attach.files ?? [])].map(readAsDataUrl));
    attach.value = '';
    setAttachments([...attachments, ...added]);
  });
  const menu = byId('menu-toggle');
  menu.addEventListener('click', () => {
    const open = menu.getAttribute('aria-expanded') !== 'true';
    menu.setAttribute('aria-expanded', String(open));
    byId('sidebar').classList.toggle('open', open);
  });
}

wireEvents();
redraw();
void connect();
