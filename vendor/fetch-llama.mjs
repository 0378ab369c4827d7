#!/usr/bin/env node
// Obtains the pinned llama.cpp source tree from the npm registry and clones it into vendor/llama.cpp.
// Contract: idempotent (a checkout already at the pinned commit is left alone); any failure
// (no registry access, wrong checksum, bad bundle) exits 1 with a message saying what to do.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const vendorDir = dirname(fileURLToPath(import.meta.url));
const pin = JSON.parse(readFileSync(join(vendorDir, 'llama.cpp.pin.json'), 'utf8'));
const target = join(vendorDir, 'llama.cpp');

function fail(message) {
  console.error(`\n[vendor] ${message}\n`);
  process.exit(1);
}

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts }).trim();
}

function checkedOutCommit() {
  if (!existsSync(join(target, '.git'))) return null;
  try {
    return run('git', ['-C', target, 'rev-parse', 'HEAD']);
  } catch {
    return null;
  }
}

if (checkedOutCommit() === pin.commit) {
  console.log(`[vendor] llama.cpp ${pin.commit.slice(0, 10)} already present`);
  process.exit(0);
}

const work = mkdtempSync(join(tmpdir(), 'llama-vendor-'));
try {
  const spec = `${pin.package}@${pin.version}`;
  console.log(`[vendor] fetching ${spec} from the npm registry`);
  let tarball;
  try {
    tarball = run('npm', ['pack', spec, '--silent', '--pack-destination', work], { cwd: work }).split('\n').pop();
  } catch (err) {
    fail(`could not download ${spec} from the npm registry (${String(err.stderr || err.message).trim().split('\n').pop()}).\n` +
      `         The llama.cpp source comes from that package; check the registry access and run npm install again.`);
  }
  try {
    run('tar', ['-xzf', join(work, tarball), '-C', work, pin.file]);
  } catch {
    fail(`${spec} does not contain ${pin.file}`);
  }
  const bundle = join(work, pin.file);
  const sha256 = createHash('sha256').update(readFileSync(bundle)).digest('hex');
  if (sha256 !== pin.sha256) {
    fail(`checksum mismatch for ${pin.file} in ${spec}:\n         expected ${pin.sha256}\n         got      ${sha256}\n` +
      `         Refusing to build from an unverified llama.cpp source.`);
  }
  rmSync(target, { recursive: true, force: true });
  run('git', ['clone', '--quiet', '--no-checkout', bundle, target]);
  run('git', ['-C', target, '-c', 'advice.detachedHead=false', 'checkout', '--quiet', pin.commit]);
  if (checkedOutCommit() !== pin.commit) fail(`clone of the bundle is not at ${pin.commit}`);
  console.log(`[vendor] llama.cpp ${pin.commit.slice(0, 10)} verified (sha256 ${sha256.slice(0, 12)}) and checked out`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
