#!/usr/bin/env node
// Builds the native addon with cmake-js (CMakeLists.txt is the only build), and rpc-server.
// Backends: GGML_CUDA=ON or GGML_METAL=ON in the environment, or `npm config set ggml_cuda ON`
// (seen here as npm_config_ggml_cuda), are passed to CMake. The build is incremental: with
// nothing changed it only checks timestamps.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function flag(name) {
  const value = process.env[name] ?? process.env[`npm_config_${name.toLowerCase()}`];
  return value && /^(on|1|true|yes)$/i.test(value) ? 'ON' : 'OFF';
}

const defines = ['GGML_CUDA', 'GGML_METAL'].map((name) => `--CD${name}=${flag(name)}`);
// CUDA: the GPU architectures to compile for (e.g. 90 for H100); without it ggml compiles for the
// GPU of the building machine, which fails where there is none.
const cudaArchitectures = process.env.CMAKE_CUDA_ARCHITECTURES ?? process.env.npm_config_cmake_cuda_architectures;
if (cudaArchitectures) defines.push(`--CDCMAKE_CUDA_ARCHITECTURES=${cudaArchitectures}`);
// ADDON_CMAKE_DEFINES="NAME=VALUE ...": any other CMake cache entries, e.g. where CMake's
// FindCUDAToolkit misses a distribution's layout (Debian's nvidia-cuda-toolkit: CUDAToolkit_INCLUDE_DIR=/usr/include).
for (const entry of (process.env.ADDON_CMAKE_DEFINES ?? '').split(/\s+/).filter((e) => e.includes('='))) defines.push(`--CD${entry}`);
// Resolved as Node resolves packages: an installed package's dependencies may be hoisted beside it.
const cmakeJs = createRequire(join(root, 'package.json')).resolve('cmake-js/bin/cmake-js');
const args = [cmakeJs, 'build', '--directory', root, '--out', join(root, 'build'), '--config', 'Release',
  '--parallel', String(availableParallelism()), ...defines];
const started = Date.now();
// ccache keys on paths relative to the checkout, so a fresh clone reuses an earlier build's objects.
const env = { ...process.env, CCACHE_BASEDIR: process.env.CCACHE_BASEDIR ?? root };
const result = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: root, env });
if (result.status !== 0) {
  console.error('\n[addon] the native build failed; see the compiler output above.');
  process.exit(result.status ?? 1);
}
// rpc-server (--rpc host:port on another machine) from the same tree: build/bin/ggml-rpc-server.
const rpc = spawnSync('cmake', ['--build', join(root, 'build'), '--config', 'Release', '--target', 'ggml-rpc-server', '--parallel', String(availableParallelism())],
  { stdio: 'inherit', cwd: root, env });
if (rpc.status !== 0) {
  console.error('\n[addon] building rpc-server failed; see the compiler output above.');
  process.exit(rpc.status ?? 1);
}
console.log(`[addon] built in ${((Date.now() - started) / 1000).toFixed(1)} s (${defines.join(' ')}), with build/bin/ggml-rpc-server`);
