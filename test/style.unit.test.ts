// The code-size rules of the tree: no file in src/ or native/ is longer than 700 lines (a file is
// one concept), and no function longer than 80 lines, except a flat field mapping marked so by a
// comment line right above it that says "flat field mapping" (a table of fields, nothing to read
// top to bottom).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t from 'tap';
import ts from 'typescript';
import { REPO_ROOT } from './helpers/reference.js';

const MAX_LINES = 80;
const MAX_FILE_LINES = 700;
const EXEMPT = /flat field mapping/i;

interface LongFunction {
  where: string;
  lines: number;
}

function tracked(pattern: string): string[] {
  return execFileSync('git', ['ls-files', pattern], { cwd: REPO_ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
}

function exempt(lines: readonly string[], firstLine: number): boolean {
  return firstLine > 0 && EXEMPT.test(lines[firstLine - 1] ?? '');
}

function longTypeScriptFunctions(file: string): LongFunction[] {
  const text = readFileSync(`${REPO_ROOT}/${file}`, 'utf8');
  const lines = text.split('\n');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const count = source.getLineAndCharacterOfPosition(node.end).line - first + 1;
      if (count > MAX_LINES && !exempt(lines, first)) found.push({ where: `${file}:${first + 1}`, lines: count });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Function bodies of a C++ file: a `{` at namespace, class or file level whose text since the
 * previous `;`, `{` or `}` holds a `)` (a signature) and no `=` (an initializer) opens one.
 * Strings, characters and comments are skipped.
 */
function longCppFunctions(file: string): LongFunction[] {
  const text = readFileSync(`${REPO_ROOT}/${file}`, 'utf8');
  const lines = text.split('\n');
  const found: LongFunction[] = [];
  type Frame = { kind: 'scope' } | { kind: 'function'; firstLine: number } | { kind: 'block' };
  const frames: Frame[] = [];
  let line = 0;
  let statement = '';
  let statementLine = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\n') line++;
    if (c === '/' && text[i + 1] === '/') { while (i < text.length && text[i] !== '\n') i++; line++; continue; }
    if (c === '/' && text[i + 1] === '*') { const end = text.indexOf('*/', i + 2); line += text.slice(i, end).split('\n').length - 1; i = end + 1; continue; }
    if (c === '"' || c === '\'') {
      if (c === '"' && text[i - 1] === 'R') { const close = text.indexOf(')' + text.slice(i + 1, text.indexOf('(', i)) + '"', i); line += text.slice(i, close).split('\n').length - 1; i = close + 1; continue; }
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === '\\') i++;
      continue;
    }
    if (c === '#' && statement.trim() === '') { while (i < text.length && text[i] !== '\n') i++; line++; continue; }
    if (statement.trim() === '' && !/\s/.test(c)) statementLine = line;
    if (c === '{') {
      const inFunction = frames.some((f) => f.kind === 'function');
      const head = statement.trim();
      if (inFunction) frames.push({ kind: 'block' });
      else if (/^(namespace|extern|struct|class|union|enum)\b/.test(head) || /\b(struct|class)\s+\w+[^()]*$/.test(head)) frames.push({ kind: 'scope' });
      else if (head.includes(')') && !/=\s*$/.test(head) && !/^[^(]*=/.test(head)) frames.push({ kind: 'function', firstLine: statementLine });
      else frames.push({ kind: 'block' });
      statement = '';
    } else if (c === '}') {
      const frame = frames.pop();
      if (frame?.kind === 'function') {
        const count = line - frame.firstLine + 1;
        if (count > MAX_LINES && !exempt(lines, frame.firstLine)) found.push({ where: `${file}:${frame.firstLine + 1}`, lines: count });
      }
      statement = '';
    } else if (c === ';') {
      statement = '';
    } else {
      statement += c;
    }
  }
  return found;
}

t.test(`no file in src/ or native/ is longer than ${MAX_FILE_LINES} lines`, async (t) => {
  const files = [...tracked('src/**/*.ts'), ...tracked('src/**/*.cts'), ...tracked('native/*.cpp'), ...tracked('native/*.h')];
  t.ok(files.length > 100, `${files.length} files read`);
  const long = files.map((file) => ({ file, lines: readFileSync(`${REPO_ROOT}/${file}`, 'utf8').split('\n').length - 1 })).filter((f) => f.lines > MAX_FILE_LINES);
  t.same(long, []);
});

t.test(`no function in src/ is longer than ${MAX_LINES} lines`, async (t) => {
  t.same(tracked('src/**/*.ts').flatMap(longTypeScriptFunctions), []);
});

t.test(`no function in native/ is longer than ${MAX_LINES} lines`, async (t) => {
  t.same(tracked('native/*.cpp').concat(tracked('native/*.h')).flatMap(longCppFunctions), []);
});

t.test('the C++ scan finds a long function and honours the exemption', async (t) => {
  const body = Array.from({ length: MAX_LINES }, (_, i) => `    x += ${i}; // "}" '{'`).join('\n');
  const sample = `namespace a {\nstruct S { int f() const {\n${body}\n  return 0; } };\n}\n// flat field mapping\nint g(int y) {\n${body}\n}\n`;
  const path = 'build/style-sample.cpp';
  const { writeFileSync, mkdirSync } = await import('node:fs');
  mkdirSync(`${REPO_ROOT}/build`, { recursive: true });
  writeFileSync(`${REPO_ROOT}/${path}`, sample);
  t.same(longCppFunctions(path), [{ where: `${path}:2`, lines: MAX_LINES + 2 }]);
});
