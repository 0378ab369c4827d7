// A Hugging Face cache (the layout llama.cpp's common/hf-cache.cpp reads: models--<org>--<repo>/
// refs/main and snapshots/<commit>/<file>) holding the suite's stand-in models under the hub names
// test_router.py asks for. llama-server's router lists the models of its cache (LLAMA_CACHE) and
// loads them offline from there; so does inference-server's. The files are symbolic links to the
// generated models (hf-cache.cpp accepts links, as the real cache uses them).
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SuiteModels } from '../fixtures/suite-models.js';

/** A fixed commit id: the cache needs one, its value does not matter offline. */
const COMMIT = '0123456789abcdef0123456789abcdef01234567';

/** repo -> file name in the snapshot -> stand-in. The file name's last -TAG is the quantization tag the tests name (":Q8_0", ":F32"). */
function repos(models: SuiteModels): Record<string, Record<string, string>> {
  return {
    'ggml-org/tinygemma3-GGUF': { 'tinygemma3-Q8_0.gguf': models.tinygemma3, 'mmproj-tinygemma3-Q8_0.gguf': models.tinygemma3Mmproj },
    'ggml-org/test-model-stories260K': { 'stories260K-F32.gguf': models.stories260k },
    'ggml-org/test-model-stories260K-infill': { 'stories260K-infill-F32.gguf': models.stories260kInfill },
  };
}

/** Writes the cache into `dir` (emptied first); returns `dir`, the LLAMA_CACHE for both servers. */
export function writeSuiteHfCache(dir: string, models: SuiteModels): string {
  rmSync(dir, { recursive: true, force: true });
  for (const [repo, files] of Object.entries(repos(models))) {
    const root = join(dir, `models--${repo.replaceAll('/', '--')}`);
    mkdirSync(join(root, 'refs'), { recursive: true });
    writeFileSync(join(root, 'refs', 'main'), COMMIT);
    const snapshot = join(root, 'snapshots', COMMIT);
    mkdirSync(snapshot, { recursive: true });
    for (const [name, target] of Object.entries(files)) symlinkSync(target, join(snapshot, name));
  }
  return dir;
}
