// The chat page: connects to the server (asking for the API key when it answers 401), streams
// answers from /v1/chat/completions into the open conversation, and stops them on request
// (aborting the fetch closes the connection; the server cancels the task and frees its slot).
import { InferenceApi, KeyRequired, Loading, type Delta, type Props } from './api.js';
import { ConversationStore, type AudioClip, type ChatMessage, type Conversation } from './conversations.js';
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
/** Files picked for the next message: images (data URLs) and audio clips, in the order picked. */
type Attachment = { kind: 'image'; url: string } | { kind: 'audio'; clip: AudioClip & { name: string } };
let attachments: Attachment[] = [];
/** What the model takes besides text, from /props. */
let modalities = { vision: false, audio: false };
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
  offerAttachments(props.modalities?.vision === true, props.modalities?.audio === true);
  promptInput.disabled = false;
  setRunning(false);
  status.start();
  promptInput.focus();
}

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/bmp'];
const AUDIO_TYPES = ['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/mpeg', 'audio/mp3', '.wav', '.mp3'];

/** Shows the attach button for what the model takes (images with a vision projector, audio with an audio one). */
function offerAttachments(vision: boolean, audio: boolean): void {
  modalities = { vision, audio };
  const input = byId<HTMLInputElement>('attach');
  input.accept = [...(vision ? IMAGE_TYPES : []), ...(audio ? AUDIO_TYPES : [])].join(',');
  byId('attach-text').textContent = vision && audio ? 'Attach image or audio' : audio ? 'Attach audio' : 'Attach image';
  byId('attachments').setAttribute('aria-label', vision && audio ? 'Attached files' : audio ? 'Attached audio' : 'Attached images');
  byId('attach-label').hidden = !vision && !audio;
}

/** The format OpenAI's input_audio part names, from the file's type or else its extension; null when neither WAV nor MP3. */
function audioFormat(file: File): AudioClip['format'] | null {
  if (/^audio\/(x-|vnd\.)?wave?$/i.test(file.type)) return 'wav';
  if (/^audio\/(mpeg|mp3|x-mp3|mpeg3)$/i.test(file.type)) return 'mp3';
  const extension = /\.(wav|mp3)$/i.exec(file.name)?.[1]?.toLowerCase();
  return extension === 'wav' || extension === 'mp3' ? extension : null;
}

/** The base64 after a data URL's comma (what input_audio's data takes: no data: prefix). */
function base64Of(dataUrl: string): string {
  return dataUrl.slice(dataUrl.indexOf(',') + 1);
}

/** The conversation as the API's messages: the system prompt first, images as image_url parts, audio as input_audio parts. */
function apiMessages(messages: readonly ChatMessage[]): unknown[] {
  const out: unknown[] = settings.systemPrompt ? [{ role: 'system', content: settings.systemPrompt }] : [];
  for (const m of messages) {
    if (m.role === 'assistant' && (m.error || m.content === '')) continue;
    out.push(m.images?.length || m.audio?.length
      ? { role: m.role, content: [
        { type: 'text', text: m.content },
        ...(m.images ?? []).map((url) => ({ type: 'image_url', image_url: { url } })),
        ...(m.audio ?? []).map((clip) => ({ type: 'input_audio', input_audio: { data: base64Of(clip.data), format: clip.format } })),
      ] }
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
  const images = attachments.flatMap((a) => (a.kind === 'image' ? [a.url] : []));
  const audio = attachments.flatMap((a) => (a.kind === 'audio' ? [a.clip] : []));
  target.messages.push({ role: 'user', content: text, ...(images.length ? { images } : {}), ...(audio.length ? { audio } : {}) });
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
  if (!store.touch(target)) setConnection('Connected (attachments too large to keep in this browser)');
  if (conversation === target) redraw();
  void status.refresh();
}

/** The tray above the prompt: a thumbnail per image, the file name per audio clip, each with its remove button. */
function setAttachments(list: Attachment[]): void {
  attachments = list;
  byId<HTMLUListElement>('attachments').replaceChildren(...list.map((attachment, i) => {
    const item = document.createElement('li');
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = '×';
    remove.addEventListener('click', () => setAttachments(attachments.filter((_, j) => j !== i)));
    if (attachment.kind === 'image') {
      const img = document.createElement('img');
      img.src = attachment.url;
      img.alt = `Image ${i + 1} to send`;
      remove.setAttribute('aria-label', `Remove image ${i + 1}`);
      item.append(img, remove);
    } else {
      item.className = 'audio';
      const name = document.createElement('span');
      name.className = 'name';
      name.textContent = attachment.clip.name;
      remove.setAttribute('aria-label', `Remove audio ${attachment.clip.name}`);
      item.append(name, remove);
    }
    return item;
  }));
}

/** Reads picked files into attachments; files the model cannot take are named in the tray's error line. */
async function attachFiles(files: File[]): Promise<void> {
  const refused: string[] = [];
  const added = await Promise.all(files.map(async (file): Promise<Attachment | null> => {
    const format = audioFormat(file);
    if (format && modalities.audio) {
      // The stored data URL names the format's own type, whatever type the browser guessed for the file.
      const data = `data:${format === 'wav' ? 'audio/wav' : 'audio/mpeg'};base64,${base64Of(await readAsDataUrl(file))}`;
      return { kind: 'audio', clip: { data, format, name: file.name } };
    }
    if (IMAGE_TYPES.includes(file.type) && modalities.vision) return { kind: 'image', url: await readAsDataUrl(file) };
    refused.push(file.name);
    return null;
  }));
  byId('attach-error').textContent = refused.length ? `The model cannot take ${refused.join(', ')}.` : '';
  setAttachments([...attachments, ...added.filter((a): a is Attachment => a !== null)]);
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
  attach.addEventListener('change', () => {
    const files = [...(attach.files ?? [])];
    attach.value = '';
    void attachFiles(files);
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
