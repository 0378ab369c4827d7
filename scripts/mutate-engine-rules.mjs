#!/usr/bin/env node
// Mutation checks of the engine's rule tests (test/native/engine-rules.cpp): breaks each rule of
// the engine core in turn (one line of its source patched), rebuilds only the engine_rules_test
// target, runs it on the tiny chat model and shows that the check named for that rule fails. A
// rule whose named check still passes is reported (exit 1): its test could pass with it broken.
// Not part of npm test (each mutation rebuilds part of the core: minutes in all).
//
//   node scripts/mutate-engine-rules.mjs                # every mutation
//   node scripts/mutate-engine-rules.mjs restore admission-priority   # those named
//
// The patched files must be unmodified in git (the original is restored after each mutation, and
// on an interrupt); the build is brought back to the unpatched sources at the end.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const build = join(root, 'build');
const model = join(root, 'models', 'tiny-chat.gguf');

// name: the rule broken; file, from -> to: the patch (`from` must occur exactly once); fails: the
// check (its name as the program prints it) that must then fail.
const MUTATIONS = [
  { name: 'restore', file: 'native/restore-rule.cpp', from: '4 * common_prefix >= state_tokens', to: '8 * common_prefix >= state_tokens',
    fails: 'restore rule: less than a quarter, never (a large state for a sliver of it)' },
  { name: 'restore-disk', file: 'native/disk-cache.cpp', from: 'if (n > best && restore_keeps_enough(n, e.tokens.size())) {', to: 'if (n > best) {',
    fails: 'restore rule: disk: 99 of 400 tokens kept, not read' },
  { name: 'restore-ram', file: 'native/prompt-cache.cpp', from: 'if (!restore_keeps_enough(n, it->tokens.size())) continue;', to: '',
    fails: 'restore rule: host memory: 99 of 400 tokens kept, not restored' },
  { name: 'step-cost-rise', file: 'native/step-cost.h', from: 'prompt_ahead_us_ = std::max(prompt_us_, sample + rise);', to: 'prompt_ahead_us_ = prompt_us_;',
    fails: 'step cost: a rising cost is priced one rise ahead (140 us)' },
  { name: 'admission-priority', file: 'native/admission.cpp', from: 'return a.share->priority < b.share->priority;', to: 'return a.share->priority > b.share->priority;',
    fails: 'priority within a tenant: lower first, then arrival order' },
  { name: 'admission-one-tenant', file: 'native/admission.cpp', from: 'fair_share ? waiting[i].share->tenant : one_tenant', to: 'waiting[i].share->tenant',
    fails: 'without fair share: arrival order across tenants (A\'s backlog first)' },
  { name: 'admission-class', file: 'native/admission.cpp', from: 'if (c < best_c) best = q.head, best_q = &q;', to: 'if (c > best_c) best = q.head, best_q = &q;',
    fails: 'classes: interactive before batch, whatever the virtual times' },
  { name: 'admission-idle-start', file: 'native/admission.cpp', from: 'start = i == 0 ? v : std::min(start, v);', to: 'start = 0;',
    fails: 'a tenant back from idle starts where the active tenants\' running work started (no credit banked while idle)' },
  { name: 'admission-cost', file: 'native/admission.cpp', from: 'std::min<int64_t>(room, ADMISSION_DEFAULT_PREDICT)', to: 'ADMISSION_DEFAULT_PREDICT',
    fails: '... by the slot\'s room' },
  { name: 'chained-join', file: 'native/prefix-sharing.cpp', from: 'if (s.joined() && n < s.join_len + kJoinMinTokens) continue;', to: '',
    fails: 'chained joins: 31 tokens beyond a joined slot\'s join: waits for that slot\'s source' },
  { name: 'slot-similarity', file: 'native/slot-cache-policy.cpp', from: 'similarity > params_.slot_prompt_similarity', to: 'similarity > 2',
    fails: 'without sharing: the slot holding the largest fraction of the prompt above -sps' },
  { name: 'disk-read-bound', file: 'native/disk-cache.cpp', from: 'return held_reads == 0 || (', to: 'return (',
    fails: 'disk reads: one read is always allowed, whatever its size' },
  { name: 'disk-writing', file: 'native/disk-cache.cpp', from: 'if (w.second == lora) best = std::max(best, common_prefix_length(w.first, tokens));', to: '',
    fails: 'disk writes: nor while it is being written' },
  { name: 'disk-checksum', file: 'native/disk-file.cpp', from: 'if (checksum(file, prefix_size, file + prefix_size, h->state_size) != stored) return "checksum";', to: '',
    fails: 'disk file: a flipped byte of the state fails the checksum' },
];

const chosen = process.argv.slice(2);
const todo = chosen.length ? MUTATIONS.filter((m) => chosen.includes(m.name)) : MUTATIONS;
if (todo.length !== (chosen.length || MUTATIONS.length)) {
  console.error(`unknown mutation; known: ${MUTATIONS.map((m) => m.name).join(', ')}`);
  process.exit(2);
}
if (!existsSync(join(build, 'build.ninja')) && !existsSync(join(build, 'Makefile'))) {
  console.error('no build/: run `npm run build:addon` first');
  process.exit(2);
}
for (const file of new Set(todo.map((m) => m.file))) {
  const dirty = spawnSync('git', ['diff', '--quiet', 'HEAD', '--', file], { cwd: root }).status !== 0;
  if (dirty) {
    console.error(`${file} has changes of its own: commit or stash them first`);
    process.exit(2);
  }
}

const buildRules = () =>
  execFileSync('cmake', ['--build', build, '--config', 'Release', '--target', 'engine_rules_test', '--parallel'], {
    cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, CCACHE_BASEDIR: process.env.CCACHE_BASEDIR ?? root },
  });

/** The check lines of a run: name -> ok. */
function runRules() {
  const run = spawnSync(join(build, 'bin', 'engine_rules_test'), [model], { encoding: 'utf8', timeout: 300_000 });
  const checks = new Map();
  for (const line of run.stdout.split('\n')) {
    const m = /^(ok|not ok) - (.*?)(?: # .*)?$/.exec(line);
    if (m) checks.set(m[2], m[1] === 'ok');
  }
  return { status: run.status, checks };
}

let restore = null;  // puts back the file being patched
process.on('SIGINT', () => { restore?.(); process.exit(130); });

buildRules();
const baseline = runRules();
const missing = todo.filter((m) => baseline.checks.get(m.fails) !== true);
if (baseline.status !== 0 || missing.length > 0) {
  console.error(`the unpatched rules must pass first (exit ${baseline.status}); checks not passing or not found: ${missing.map((m) => m.fails).join('; ')}`);
  process.exit(1);
}

let survived = 0;
try {
  for (const m of todo) {
    const path = join(root, m.file);
    const original = readFileSync(path, 'utf8');
    if (original.split(m.from).length !== 2) throw new Error(`${m.name}: the patched text does not occur exactly once in ${m.file}`);
    restore = () => writeFileSync(path, original);
    writeFileSync(path, original.replace(m.from, m.to));
    let result;
    try {
      buildRules();
      result = runRules();
    } finally {
      restore();
      restore = null;
    }
    const failed = result.checks.get(m.fails) === false;
    const others = [...result.checks].filter(([name, ok]) => !ok && name !== m.fails).length;
    if (!failed) survived++;
    console.log(`${failed ? 'killed  ' : 'SURVIVED'} ${m.name}: ${m.file}: "${m.from}" -> "${m.to}"`);
    console.log(`         ${failed ? 'fails' : 'still passes'}: ${m.fails}${others ? ` (and ${others} other check${others > 1 ? 's' : ''})` : ''}; exit ${result.status}`);
  }
} finally {
  buildRules();
}
console.log(`${todo.length - survived} of ${todo.length} mutations caught by their named check`);
process.exit(survived === 0 ? 0 : 1);
