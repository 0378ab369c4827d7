// Conversations kept in this browser (localStorage), newest first. Nothing is stored on the
// server. Images and audio clips are stored with their message as data URLs; when that overflows
// the storage quota, the conversations are saved without them and `save` reports it.

const STORAGE_KEY = 'inference-chat:conversations';
const CURRENT_KEY = 'inference-chat:current';

/** An attached audio clip: what OpenAI's input_audio part takes (WAV or MP3). */
export interface AudioClip {
  /** A data URL (data:audio/wav or data:audio/mpeg, base64). */
  data: string;
  format: 'wav' | 'mp3';
  /** The file's name, as picked. */
  name?: string;
}

export interface ChatMessage {
  role: 'user' | 'assistant';
  content: string;
  /** Data URLs of attached images (user messages). */
  images?: string[];
  /** Attached audio clips (user messages); absent in conversations saved before audio. */
  audio?: AudioClip[];
  reasoning?: string;
  toolCalls?: Array<{ name: string; arguments: string }>;
  /** Generation speed of an answer, from the server's timings. */
  stats?: { tokens: number; perSecond: number };
  /** The answer was stopped before it ended. */
  stopped?: boolean;
  error?: string;
}

export interface Conversation {
  id: string;
  title: string;
  updated: number;
  messages: ChatMessage[];
}

export class ConversationStore {
  private conversations: Conversation[] = load();

  list(): readonly Conversation[] {
    return this.conversations;
  }

  get(id: string | null): Conversation | undefined {
    return this.conversations.find((c) => c.id === id);
  }

  currentId(): string | null {
    return localStorage.getItem(CURRENT_KEY);
  }

  setCurrent(id: string | null): void {
    if (id === null) localStorage.removeItem(CURRENT_KEY);
    else localStorage.setItem(CURRENT_KEY, id);
  }

  create(): Conversation {
    const conversation: Conversation = { id: crypto.randomUUID(), title: 'New chat', updated: Date.now(), messages: [] };
    this.conversations.unshift(conversation);
    this.setCurrent(conversation.id);
    return conversation;
  }

  delete(id: string): void {
    this.conversations = this.conversations.filter((c) => c.id !== id);
    if (this.currentId() === id) this.setCurrent(null);
    this.save();
  }

  /** Moves the conversation to the top, titles it after its first message, and saves. Returns false when attachments had to be left out. */
  touch(conversation: Conversation): boolean {
    conversation.updated = Date.now();
    const first = conversation.messages.find((m) => m.role === 'user');
    if (first && conversation.title === 'New chat') conversation.title = first.content.trim().slice(0, 60) || (first.images?.length ? 'Image' : 'Audio');
    this.conversations = [conversation, ...this.conversations.filter((c) => c.id !== conversation.id)];
    return this.save();
  }

  private save(): boolean {
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify(this.conversations));
      return true;
    } catch {
      const withoutAttachments = this.conversations.map((c) => ({ ...c, messages: c.messages.map(({ images: _i, audio: _a, ...m }) => m) }));
      try {
        localStorage.setItem(STORAGE_KEY, JSON.stringify(withoutAttachments));
      } catch {
        // Still too large: the conversations live on in this tab only.
      }
      return false;
    }
  }
}

function load(): Conversation[] {
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? '[]');
    return Array.isArray(parsed) ? (parsed as Conversation[]).filter((c) => typeof c?.id === 'string' && Array.isArray(c.messages)) : [];
  } catch {
    return [];
  }
}
