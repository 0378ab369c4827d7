// The system prompt and the main sampling settings: a form whose values are kept in
// localStorage and sent with every request. An empty field sends nothing (the server's default).

const STORAGE_KEY = 'inference-chat:settings';
const NUMBER_FIELDS = ['temperature', 'top_k', 'top_p', 'min_p', 'repeat_penalty', 'max_tokens', 'seed'] as const;
/** The server's name of each field in /props' default_generation_settings.params. */
const SERVER_NAMES: Record<string, string> = { max_tokens: 'n_predict' };

export class SettingsForm {
  constructor(private readonly form: HTMLFormElement) {
    const saved = readSaved();
    for (const [name, value] of Object.entries(saved)) {
      const field = this.field(name);
      if (field) field.value = value;
    }
    form.addEventListener('input', () => this.save());
    form.addEventListener('submit', (event) => event.preventDefault());
  }

  /** Fills empty fields with the server's defaults (from /props) as placeholders. */
  showDefaults(params: Record<string, unknown> | undefined): void {
    for (const name of NUMBER_FIELDS) {
      const value = params?.[SERVER_NAMES[name] ?? name];
      if (typeof value === 'number' && name !== 'seed') this.field(name)!.placeholder = String(Math.round(value * 1000) / 1000);
    }
  }

  /** Clears every sampling field (the server's defaults apply again); keeps the system prompt. */
  reset(): void {
    for (const name of NUMBER_FIELDS) this.field(name)!.value = '';
    this.save();
  }

  get systemPrompt(): string {
    return this.field('system')!.value.trim();
  }

  /** Request fields for /v1/chat/completions. */
  requestFields(): Record<string, number> {
    const fields: Record<string, number> = {};
    for (const name of NUMBER_FIELDS) {
      const raw = this.field(name)!.value.trim();
      const value = Number(raw);
      if (raw !== '' && Number.isFinite(value)) fields[name] = value;
    }
    return fields;
  }

  private field(name: string): HTMLInputElement | HTMLTextAreaElement | null {
    return this.form.elements.namedItem(name) as HTMLInputElement | HTMLTextAreaElement | null;
  }

  private save(): void {
    const values: Record<string, string> = { system: this.field('system')!.value };
    for (const name of NUMBER_FIELDS) values[name] = this.field(name)!.value;
    localStorage.setItem(STORAGE_KEY, JSON.stringify(values));
  }
}

function readSaved(): Record<string, string> {
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? '{}');
    if (!parsed || typeof parsed !== 'object') return {};
    return Object.fromEntries(Object.entries(parsed).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
  } catch {
    return {};
  }
}
