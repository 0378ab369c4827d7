// edit_file's fuzzy matching (server-tools.cpp): when an old_text is not in the file as given,
// both are compared with trailing whitespace stripped from each line and typographic quotes,
// dashes and spaces made ASCII; untouched lines are then kept exactly as they were. All strings
// here are bytes (one char per byte of UTF-8, see params.ts).

const hex = (...bytes: number[]): string => String.fromCharCode(...bytes);

/** [from, to] byte sequences replaced on each line, in llama-server's order. */
const FUZZY_REPLACEMENTS: ReadonlyArray<readonly [string, string]> = [
  ...[0x98, 0x99, 0x9a, 0x9b].map((b) => [hex(0xe2, 0x80, b), "'"] as const),
  ...[0x9c, 0x9d, 0x9e, 0x9f].map((b) => [hex(0xe2, 0x80, b), '"'] as const),
  ...[0x90, 0x91, 0x92, 0x93, 0x94, 0x95].map((b) => [hex(0xe2, 0x80, b), '-'] as const),
  [hex(0xe2, 0x88, 0x92), '-'],
  [hex(0xc2, 0xa0), ' '],
  ...[0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a].map((b) => [hex(0xe2, 0x80, b), ' '] as const),
  [hex(0xe2, 0x80, 0xaf), ' '],
  [hex(0xe2, 0x81, 0x9f), ' '],
  [hex(0xe3, 0x80, 0x80), ' '],
];

function normalizeLine(line: string): string {
  let s = line.replace(/[ \t\r]+$/, '');
  for (const [from, to] of FUZZY_REPLACEMENTS) s = s.replaceAll(from, to);
  return s;
}

/** Every line normalised; line count and positions are kept. */
export function normalizeForFuzzyMatch(content: string): string {
  return content.split('\n').map(normalizeLine).join('\n');
}

/** Non-overlapping occurrences of `needle`. */
export function countOccurrences(content: string, needle: string): number {
  if (needle === '') return 0;
  let count = 0;
  for (let pos = content.indexOf(needle); pos !== -1; pos = content.indexOf(needle, pos + needle.length)) count++;
  return count;
}

export interface MatchedEdit {
  editIndex: number;
  /** Offset into the content the match was found in. */
  matchIndex: number;
  matchLength: number;
  newText: string;
}

/** Replacements sorted by matchIndex, not overlapping; `offset` is where `content` starts. */
export function applyReplacements(content: string, replacements: readonly MatchedEdit[], offset: number): string {
  let result = content;
  for (let i = replacements.length - 1; i >= 0; i--) {
    const r = replacements[i]!;
    const local = r.matchIndex - offset;
    result = result.slice(0, local) + r.newText + result.slice(local + r.matchLength);
  }
  return result;
}

/** Lines with their '\n' kept. */
function splitLinesWithEndings(content: string): string[] {
  return content.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

interface LineSpan {
  start: number;
  end: number;
}

function lineSpans(content: string): LineSpan[] {
  let offset = 0;
  return splitLinesWithEndings(content).map((line) => {
    const span = { start: offset, end: offset + line.length };
    offset += line.length;
    return span;
  });
}

/** The lines [start, end) a replacement touches, or null. */
function replacementLineRange(lines: readonly LineSpan[], rep: MatchedEdit): { start: number; end: number } | null {
  const from = rep.matchIndex;
  const to = rep.matchIndex + rep.matchLength;
  const start = lines.findIndex((l) => from >= l.start && from < l.end);
  if (start === -1) return null;
  let end = start;
  while (end < lines.length && lines[end]!.end < to) end++;
  if (end >= lines.length) return null;
  return { start, end: end + 1 };
}

/** As applyReplacements on the normalised content, with every untouched line taken from the original. */
export function applyReplacementsPreservingUnchangedLines(original: string, base: string, replacements: readonly MatchedEdit[]): string {
  const originalLines = splitLinesWithEndings(original);
  const baseLines = lineSpans(base);
  const groups: Array<{ start: number; end: number; reps: MatchedEdit[] }> = [];
  for (const rep of replacements) {
    // llama-server leaves the range at 0..0 when the lookup fails.
    const range = replacementLineRange(baseLines, rep) ?? { start: 0, end: 0 };
    const last = groups[groups.length - 1];
    if (last && range.start < last.end) {
      last.end = Math.max(last.end, range.end);
      last.reps.push(rep);
    } else {
      groups.push({ start: range.start, end: range.end, reps: [rep] });
    }
  }
  let next = 0;
  let result = '';
  for (const g of groups) {
    for (let i = next; i < g.start; i++) result += originalLines[i] ?? '';
    const from = baseLines[g.start]?.start ?? 0;
    const to = baseLines[g.end - 1]?.end ?? from;
    result += applyReplacements(base.slice(from, to), g.reps, from);
    next = g.end;
  }
  for (let i = next; i < originalLines.length; i++) result += originalLines[i];
  return result;
}
