// The flag tables the lenient server shim works from, read from the two servers' --help texts:
// for llama-server each flag's spellings and whether it takes a value, for inference-server the
// flags it accepts.

export interface LlamaFlag {
  takesValue: boolean;
  /** The other spellings of the same flag with the same polarity (--no-x is not an alias of --x). */
  aliases: string[];
}

export interface FlagTable {
  llama: Record<string, LlamaFlag>;
  ours: Record<string, { takesValue: boolean }>;
}

const NEGATIVE = /^--?no-|^-no[a-z]/;

/**
 * llama-server --help: one flag group per line starting with '-', names separated by ", ", then
 * the value's name after one space (`-c,    --ctx-size N`), then the description after two or
 * more spaces.
 */
export function parseLlamaHelp(text: string): Record<string, LlamaFlag> {
  const out: Record<string, LlamaFlag> = {};
  for (const line of text.split('\n')) {
    const m = /^(-[^\s,]+(?:,\s+-[^\s,]+)*)( \S.*?)?(?:\s{2,}|$)/.exec(line);
    if (!m || line.startsWith('-----')) continue;
    const names = m[1]!.split(/,\s+/);
    const takesValue = m[2] !== undefined;
    for (const name of names) {
      const polarity = NEGATIVE.test(name);
      out[name] = { takesValue, aliases: names.filter((n) => n !== name && NEGATIVE.test(n) === polarity) };
    }
  }
  return out;
}

/** inference-server --help: `  -m, --model <string>   description`. */
export function parseOurHelp(text: string): Record<string, { takesValue: boolean }> {
  const out: Record<string, { takesValue: boolean }> = {};
  for (const line of text.split('\n')) {
    const m = /^\s+(-[^\s,]+(?:,\s+-[^\s,]+)*)( <[^>]*>)?/.exec(line);
    if (!m) continue;
    for (const name of m[1]!.split(/,\s+/)) out[name] = { takesValue: m[2] !== undefined };
  }
  return out;
}
