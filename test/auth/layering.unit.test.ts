// The layering of src/auth, read from its import statements: handlers parse and render, services
// decide, queries only query; the embedded PostgreSQL's module is loaded only when it is needed (a
// dynamic import), so a service given DATABASE_URL never reads it. Import circles, here and in
// the rest of src/, are test/import-circles.unit.test.ts's rule.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { REPO_ROOT } from '../helpers/reference.js';

const AUTH = path.join(REPO_ROOT, 'src', 'auth');

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? files(full) : name.endsWith('.ts') ? [full] : [];
  });
}

/** The static relative imports and re-exports of every module of src/auth, as paths relative to src/auth. */
function imports(): Import[] {
  const found: Import[] = [];
  for (const file of files(AUTH)) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/^(?:import|export)\s+(type\s+)?[^'";]*?from\s+'(\.[^']+)'/gm)) {
      const target = path.resolve(path.dirname(file), match[2]!).replace(/\.js$/, '.ts');
      found.push({ from: path.relative(AUTH, file), to: path.relative(AUTH, target), typeOnly: match[1] !== undefined });
    }
  }
  return found;
}

const all = imports();
const layer = (file: string): string => file.split(path.sep)[0]!;

t.test('the scan sees the tree (a guard against a pattern that matches nothing)', async (t) => {
  t.ok(all.length > 200, `${all.length} imports`);
  t.ok(all.some((i) => i.from === path.join('handlers', 'usage.ts') && i.to === path.join('service', 'usage.ts')));
});

t.test('queries import no service, handler or route module', async (t) => {
  t.same(all.filter((i) => layer(i.from) === 'queries' && ['service', 'handlers', 'routes.ts', 'respond.ts'].includes(layer(i.to))), []);
});

t.test('handlers use query modules for their row types only, never to run a query', async (t) => {
  t.same(all.filter((i) => layer(i.from) === 'handlers' && layer(i.to) === 'queries' && !i.typeOnly), []);
});

t.test('handlers import no other handler module (shared parsing has its own module)', async (t) => {
  t.same(all.filter((i) => layer(i.from) === 'handlers' && layer(i.to) === 'handlers' && i.to !== path.join('handlers', 'query-params.ts')), []);
});

t.test('the embedded PostgreSQL module is imported for its types only; its code by a dynamic import', async (t) => {
  const embedded = path.join('database', 'embedded-postgres.ts');
  t.same(all.filter((i) => i.to === embedded && !i.typeOnly), []);
  t.match(readFileSync(path.join(AUTH, 'mount.ts'), 'utf8'), /await import\('\.\/database\/embedded-postgres\.js'\)/);
});
