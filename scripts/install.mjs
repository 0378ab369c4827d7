#!/usr/bin/env node
// `npm install` / `npm ci` for this package.
//
// From a checkout (tsconfig.json present): fetch the pinned llama.cpp, build the addon, compile
// the TypeScript, bundle inference-server and build the web pages. Each step is skipped or
// incremental when its inputs are unchanged.
//
// From the packed package (`npm install -g llama-auth-suite-<version>.tgz`): its JavaScript is
// built before packing (prepack), so no step needs TypeScript. The addon comes from a prebuilt
// package for this platform when one is installed and passes every check (src/native/prebuilt.ts:
// platform, N-API, versions, CPU, size and sha256); otherwise, or with `--build-from-source` or
// a backend switch (GGML_CUDA, GGML_METAL, ADDON_CMAKE_DEFINES), llama.cpp is fetched and the
// addon built from source, as from a checkout.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const script = (...path) => join(root, ...path);
const vendor = ['vendor', [script('vendor', 'fetch-llama.mjs')]];
const addon = ['addon', [script('scripts', 'build-addon.mjs')]];
const bins = ['bins', [script('scripts', 'chmod-bins.mjs')]];

function run(steps) {
  for (const [name, args] of steps) {
    const result = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: root });
    if (result.status !== 0) {
      console.error(`[install] step "${name}" failed`);
      process.exit(result.status ?? 1);
    }
  }
}

function sourceBuildAsked() {
  const on = (name) => /^(on|1|true|yes)$/i.test(process.env[name] ?? process.env[`npm_config_${name.toLowerCase()}`] ?? '');
  return on('npm_config_build_from_source') || on('GGML_CUDA') || on('GGML_METAL') || Boolean(process.env.ADDON_CMAKE_DEFINES);
}

/** The accepted prebuilt package's name, or null (with the refusals printed). */
async function usablePrebuilt() {
  const { chooseAddon, currentHost, prebuiltPackageNames } = await import(pathToFileURL(script('dist', 'native', 'prebuilt.js')).href);
  const host = currentHost(root);
  const { candidates, refused } = chooseAddon(root, host, { verifyContents: true });
  for (const { name, reason } of refused) console.log(`[install] prebuilt addon ${name} refused: ${reason}`);
  const prebuilt = candidates.find((c) => c.origin !== 'build');
  if (prebuilt) return prebuilt.origin;
  if (refused.length === 0) console.log(`[install] no prebuilt addon installed (${prebuiltPackageNames(host.platform, host.arch).join(', ')})`);
  return null;
}

if (existsSync(script('tsconfig.json'))) {
  run([
    vendor,
    addon,
    ['typescript', [script('node_modules', 'typescript', 'bin', 'tsc'), '-p', script('tsconfig.json')]],
    ['bundle', [script('scripts', 'bundle.mjs')]],
    ['web', [script('scripts', 'build-web.mjs')]],
    bins,
  ]);
} else {
  for (const built of [['dist', 'inference', 'server-main.js'], ['dist', 'bundle', 'server-main.js'], ['dist', 'web']]) {
    if (!existsSync(script(...built))) {
      console.error(`[install] ${built.join('/')} is missing: this package was packed without its built JavaScript (npm pack runs prepack, which builds it)`);
      process.exit(1);
    }
  }
  const prebuilt = sourceBuildAsked() ? null : await usablePrebuilt();
  if (prebuilt) {
    console.log(`[install] using the prebuilt addon ${prebuilt}: nothing to compile`);
    run([bins]);
  } else {
    console.log('[install] building the addon from source (about 5 minutes on 2 cores)');
    run([vendor, addon, bins]);
  }
}
