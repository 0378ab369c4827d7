// Command-line flags: one table per program, parsed strictly (an unknown flag or a bad value is
// an error naming the flag, never silently ignored), with an environment variable per flag
// where the table names one, and values typed by the table.

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type FlagKind = 'string' | 'int' | 'float' | 'bool' | 'list';

export interface FlagSpec {
  /** Names including dashes, e.g. ['-m', '--model']. */
  names: readonly string[];
  kind: FlagKind;
  /** Where the value lands in the parsed flags. */
  key: string;
  help: string;
  /** For a string flag: the values it accepts (anything else is a usage error). */
  choices?: readonly string[];
  /** Environment variable read when the flag is absent. */
  env?: string;
  /** Recognised but not available yet: using it is an error with this message. */
  unsupported?: string;
}

type FlagValue<K extends FlagKind> = K extends 'string' ? string : K extends 'int' | 'float' ? number : K extends 'bool' ? boolean : string[];

type ValueOf<F extends FlagSpec> = F extends { choices: readonly (infer C)[] } ? C : FlagValue<F['kind']>;

/** The values of a flag table by key, each typed by its flag's kind; absent flags are undefined. */
export type ParsedFlags<S extends readonly FlagSpec[]> = { [F in S[number] as F['key']]?: ValueOf<F> };

type AnyFlags = Record<string, string | number | boolean | string[] | undefined>;

export function parseFlags<const S extends readonly FlagSpec[]>(argv: readonly string[], specs: S, env: NodeJS.ProcessEnv = process.env): ParsedFlags<S> {
  return parseUntyped(argv, specs, env) as ParsedFlags<S>;
}

function parseUntyped(argv: readonly string[], specs: readonly FlagSpec[], env: NodeJS.ProcessEnv): AnyFlags {
  const byName = new Map<string, FlagSpec>();
  for (const spec of specs) for (const name of spec.names) byName.set(name, spec);
  const out: AnyFlags = {};
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!;
    let inline: string | undefined;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const spec = byName.get(arg);
    if (!spec) throw new UsageError(`unknown option: ${arg} (see --help)`);
    if (spec.unsupported) throw new UsageError(`${arg}: ${spec.unsupported}`);
    if (spec.kind === 'bool') {
      out[spec.key] = inline === undefined ? true : parseBool(arg, inline);
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`${arg} needs a value`);
    out[spec.key] = convert(arg, spec, value, out[spec.key]);
  }
  for (const spec of specs) {
    if (out[spec.key] !== undefined || !spec.env) continue;
    const value = env[spec.env];
    if (value !== undefined && value !== '') {
      out[spec.key] = spec.kind === 'bool' ? parseBool(spec.env, value) : convert(spec.env, spec, value, undefined);
    }
  }
  return out;
}

function parseBool(name: string, value: string): boolean {
  if (/^(1|true|on|yes)$/i.test(value)) return true;
  if (/^(0|false|off|no)$/i.test(value)) return false;
  throw new UsageError(`${name}: expected a boolean, got "${value}"`);
}

function convert(name: string, spec: FlagSpec, value: string, previous: unknown): string | number | string[] {
  switch (spec.kind) {
    case 'int': {
      if (!/^-?\d+$/.test(value.trim())) throw new UsageError(`${name}: expected an integer, got "${value}"`);
      return Number.parseInt(value, 10);
    }
    case 'float': {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`${name}: expected a number, got "${value}"`);
      return n;
    }
    case 'list': {
      const items = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
      return [...(Array.isArray(previous) ? (previous as string[]) : []), ...items];
    }
    default:
      if (spec.choices && !spec.choices.includes(value)) throw new UsageError(`${name}: expected one of ${spec.choices.join(', ')}, got "${value}"`);
      return value;
  }
}

export function usage(command: string, summary: string, specs: readonly FlagSpec[]): string {
  const lines = [`usage: ${command} [options]`, '', summary, '', 'options:'];
  for (const spec of specs) {
    const names = spec.names.join(', ') + (spec.kind === 'bool' ? '' : ` <${spec.kind === 'list' ? 'a,b,...' : spec.kind}>`);
    lines.push(`  ${names.padEnd(34)} ${spec.help}${spec.env ? ` (env ${spec.env})` : ''}`);
  }
  return lines.join('\n');
}
