// The engine's scheduling and cache rules, tested in C++ on the engine core without a server
// (test/native/engine-rules.cpp): slot choice, joins and the chained-join rule, eviction under KV
// pressure, unsharing before cells move, step composition, fair share across tenants, and the
// disk tier's bound on reads held, its file format and rule for writing again, the one restore
// rule of both cache tiers. Each check the program prints is one assertion here, and their number
// is the program's plan.
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { nativeTestProgram } from '../helpers/reference.js';

const models = await ensureTestModels();
const program = await nativeTestProgram('engine_rules_test');
const run = spawnSync(program, [models.chat], { encoding: 'utf8', timeout: 120_000 });

t.equal(run.stderr, '', 'the program ran without errors');
const [plan, ...lines] = run.stdout.split('\n').filter((line) => line !== '');
// The program states how many checks a full run makes; exactly that many ran.
const planned = /^1\.\.(\d+)$/.exec(plan ?? '');
t.ok(planned, `the program printed its plan first (${plan})`);
t.equal(lines.length, Number(planned?.[1]), 'every planned check ran, and no other');
for (const line of lines) {
  const match = /^(ok|not ok) - (.*?)(?: # (.*))?$/.exec(line);
  if (!match) {
    t.fail(`an unexpected line: ${line}`);
    continue;
  }
  t.ok(match[1] === 'ok', match[2]!, match[3] ? { detail: match[3] } : {});
}
t.equal(run.status, 0, 'exit 0: every check passed');
