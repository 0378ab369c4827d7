// Speculative decoding (issue 11): single-stream greedy decode on the bench model with each kind
// of drafter, both servers on the same llama-server command line. Each drafter needs its own
// server flags, so each is a profile of one scenario.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DRAFT_MODEL, DEFAULT_MODELS_DIR, ensureBenchModel, ensureDraftModels, modelPaths } from '../test/fixtures/models.js';
import { REPO_ROOT } from '../test/helpers/reference.js';
import { median, streamCompletion } from './load.js';
import type { Profile, Scenario } from './scenario.js';

const SPEC = { predict: 128, reps: 3, draftMax: 8 };

/**
 * An edit of a code file: the file, then the request to print it again with one name changed.
 * What a code assistant's n-gram drafting is for (the answer repeats the prompt); the random-weight
 * bench model does not copy it, so the figures say what drafting costs when little is accepted.
 */
function codeEditPrompt(): string {
  const file = readFileSync(join(REPO_ROOT, 'src/inference/dialects/timings.ts'), 'utf8').slice(0, 3000);
  return `${file}\n\nPrint the file above again with \`steps\` renamed to \`decodeSteps\`:\n\n`;
}

function speculativeDecode(id: string, title: string): Scenario {
  return {
    id,
    title,
    timeoutSeconds: 480,
    description: `1 client, the code-edit prompt (a 3000-character TypeScript file and an instruction to print it again with a name changed), ${SPEC.predict} tokens generated greedily (temperature 0), stream, ignore_eos, cache_prompt false; median of ${SPEC.reps} runs after a warm-up. Decode = (n-1) tokens / (final event - first token event), client-side; acceptance = the server's timings.draft_n_accepted / draft_n.`,
    metrics: [
      { key: 'decode', label: 'decode tokens/s', unit: 'tok/s', kind: 'throughput' },
      { key: 'acceptance', label: 'draft acceptance (accepted / drafted)', unit: 'ratio', kind: 'info' },
      { key: 'drafted', label: 'drafted tokens per request', unit: 'tokens', kind: 'info' },
    ],
    async run(ctx) {
      const body = { prompt: codeEditPrompt(), n_predict: SPEC.predict, temperature: 0, ignore_eos: true, cache_prompt: false };
      await streamCompletion(ctx.base, '/completion', { ...body, n_predict: 16 });
      const decode: number[] = [];
      const acceptance: number[] = [];
      const drafted: number[] = [];
      for (let i = 0; i < SPEC.reps; i++) {
        const r = await streamCompletion(ctx.base, '/completion', body);
        if (r.predicted !== SPEC.predict) ctx.note(`${ctx.server}: ${id}: ${r.predicted} tokens generated, ${SPEC.predict} asked (ignore_eos)`);
        decode.push(((r.predicted - 1) * 1000) / (r.endAt - (r.startAt + r.firstTokenMs)));
        const n = Number(r.timings.draft_n ?? 0);
        drafted.push(n);
        acceptance.push(n > 0 ? Number(r.timings.draft_n_accepted) / n : 0);
      }
      return { decode: median(decode), acceptance: median(acceptance), drafted: median(drafted) };
    },
  };
}

// One slot, no web page, no host-memory prompt cache on either server (--cache-ram 0: the rows
// measure decoding, not saves and restores from RAM); everything else as the generation
// profile's single stream.
const common = (t: number): string[] => ['-c', '4096', '-np', '1', '-t', String(t), '-tb', String(t), '-b', '2048', '-ub', '512', '-fa', 'auto', '--no-webui', '--cache-ram', '0'];
const reference: Profile['referenceExtra'] = [];
const draftPath = join(DEFAULT_MODELS_DIR, `${BENCH_DRAFT_MODEL.name}.gguf`);
const benchModel = async (): Promise<string> => {
  await ensureDraftModels({ bench: true });
  return ensureBenchModel();
};

export const SPEC_DRAFT_PROFILE: Profile = {
  id: 'spec-draft',
  model: benchModel,
  commonArgs: (t) => [...common(t), '-md', draftPath, '--spec-type', 'draft-simple', '--spec-draft-n-max', String(SPEC.draftMax)],
  oursExtra: [],
  referenceExtra: reference,
  scenarios: [speculativeDecode('spec-draft', 'speculative: draft model (the bench model in Q8_0)')],
};

export const SPEC_SELF_PROFILE: Profile = {
  id: 'spec-self',
  model: benchModel,
  // The model as its own draft: every drafted token is accepted (the upper bound of acceptance).
  commonArgs: (t) => [...common(t), '-md', modelPaths().bench, '--spec-type', 'draft-simple', '--spec-draft-n-max', String(SPEC.draftMax)],
  oursExtra: [],
  referenceExtra: reference,
  scenarios: [speculativeDecode('spec-self', 'speculative: the model as its own draft')],
};

export const SPEC_NGRAM_PROFILE: Profile = {
  id: 'spec-ngram',
  model: benchModel,
  commonArgs: (t) => [...common(t), '--spec-type', 'ngram-simple,ngram-mod', '--spec-ngram-simple-size-n', '4', '--spec-ngram-simple-size-m', '16', '--spec-ngram-mod-n-match', '8', '--spec-ngram-mod-n-min', '4', '--spec-ngram-mod-n-max', '16'],
  oursExtra: [],
  referenceExtra: reference,
  scenarios: [speculativeDecode('spec-ngram', 'speculative: n-gram drafting, code edit')],
};
