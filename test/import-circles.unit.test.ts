// The layering rule of src/: no module imports itself back through others (an import circle
// means two concepts that cannot be read, tested or moved apart). Relative imports are read with
// TypeScript's own pre-processor (type-only imports included: they still tie the files' meaning
// together); a circle is a strongly connected group of two or more files, or a file importing
// itself.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { REPO_ROOT } from './helpers/reference.js';

/** The relative imports of each file, as repository paths of the .ts files they name. */
function importGraph(files: readonly string[], read: (file: string) => string, exists: (file: string) => boolean): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const imports = ts.preProcessFile(read(file), true, true).importedFiles.map((entry) => entry.fileName).filter((name) => name.startsWith('.'));
    const targets = imports
      .map((name) => relative(REPO_ROOT, resolve(REPO_ROOT, dirname(file), name)).replace(/\.js$/, '.ts').replace(/\.cjs$/, '.cts'))
      .filter((target) => exists(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The circles of `graph` (Tarjan's strongly connected components of two or more files, or a self-import), each sorted. */
export function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const circles: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    for (let member = stack.pop()!; ; member = stack.pop()!) {
      onStack.delete(member);
      group.push(member);
      if (member === file) break;
    }
    if (group.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(group.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles;
}

t.test('no import circles among the modules of src/', async (t) => {
  const files = execFileSync('git', ['ls-files', 'src/**/*.ts', 'src/**/*.cts'], { cwd: REPO_ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
  t.ok(files.length > 100, `${files.length} modules read`);
  const graph = importGraph(files, (file) => readFileSync(join(REPO_ROOT, file), 'utf8'), (file) => existsSync(join(REPO_ROOT, file)));
  const edges = [...graph.values()].reduce((sum, targets) => sum + targets.length, 0);
  t.ok(edges > files.length, `${edges} relative imports resolved`);
  t.same(importCircles(graph), []);
});

t.test('the rule finds a circle of three files and a self-import, and nothing in a tree', async (t) => {
  const sources: Record<string, string> = {
    'src/a.ts': "import { b } from './b.js';",
    'src/b.ts': "import type { C } from './dir/c.js';",
    'src/dir/c.ts': "export { a } from '../a.js';",
    'src/self.ts': "import './self.js';",
    'src/leaf.ts': "import { a } from './a.js'; import fs from 'node:fs';",
  };
  const graph = importGraph(Object.keys(sources), (file) => sources[file]!, (file) => file in sources);
  t.same(importCircles(graph), [['src/a.ts', 'src/b.ts', 'src/dir/c.ts'], ['src/self.ts']]);
  t.same(importCircles(new Map([['x', ['y']], ['y', []]])), []);
});
