// deploy/: every flag the Deployment passes is one the server parses, every port it names is the
// one the server listens on or the pool targets, its probes hit a route the server has, and every
// metric the endpoint picker is told to read is one /metrics renders.
import t from 'tap';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { LLAMA_SERVER_FLAGS } from '../../src/inference/llama-server-flags.js';
import { OWN_FLAGS, splitCommandLine } from '../../src/inference/server-config.js';
import { metricsText } from '../../src/inference/dialects/server-info.js';
import { modelServerMetricsText } from '../../src/inference/dialects/model-server-metrics.js';
import { MetricsLedger } from '../../src/inference/service/metrics-ledger.js';
import { DEFAULT_ENDPOINT } from '../../src/inference/kv-events/zmq-publisher.js';
import { parseMetrics } from '../helpers/prometheus.js';

const DEPLOY = join(import.meta.dirname, '../../deploy');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

const docs: Doc[] = readdirSync(DEPLOY).filter((f) => f.endsWith('.yaml')).flatMap((f) =>
  parseAllDocuments(readFileSync(join(DEPLOY, f), 'utf8')).map((d) => d.toJS()));
const byKind = (kind: string): Doc => {
  const doc = docs.find((d) => d?.kind === kind);
  if (!doc) throw new Error(`no ${kind} in deploy/`);
  return doc;
};
const deployment = byKind('Deployment');
const container = deployment.spec.template.spec.containers[0];
const args: string[] = container.args.map(String);
const argValue = (flag: string): string => args[args.indexOf(flag) + 1]!;
const eppConfig = parseYaml(byKind('ConfigMap').data['epp-config.yaml']);

t.test('every flag of the Deployment is one the server serves or hands to llama.cpp', async (t) => {
  const own = new Set(OWN_FLAGS.flatMap((spec) => spec.names as readonly string[]));
  const flags = args.filter((a) => a.startsWith('-') && !/^-?\d/.test(a.slice(1)));
  t.ok(flags.length > 5);
  for (const flag of flags) {
    const support = LLAMA_SERVER_FLAGS[flag];
    t.ok(own.has(flag) || support?.kind === 'served' || support?.kind === 'llama', `${flag} is a flag of the server`);
  }
  const { own: parsed } = splitCommandLine(args);
  t.equal(parsed.cacheDisk, '/cache', 'our own flags parse');
});

t.test('the ports: the container serves --port, the Service and the pool target it, KV events on the publisher\'s default port', async (t) => {
  const ports = Object.fromEntries(container.ports.map((p: Doc) => [p.name, p.containerPort]));
  t.equal(ports.http, Number(argValue('--port')));
  t.equal(ports['kv-events'], Number(/:(\d+)$/.exec(DEFAULT_ENDPOINT)![1]));
  t.equal(argValue('--kv-events'), `tcp://*:${ports['kv-events']}`, '--kv-events binds the kv-events port');
  const service = byKind('Service');
  for (const p of service.spec.ports) t.ok(p.targetPort in ports, `Service port ${p.name} targets a named container port`);
  const pool = byKind('InferencePool');
  t.same(pool.spec.targetPorts, [{ number: ports.http }]);
  t.same(pool.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
  for (const [k, v] of Object.entries(pool.spec.selector.matchLabels)) t.equal(deployment.spec.template.metadata.labels[k], v);
});

t.test('the probes hit /health, a public route of the server', async (t) => {
  const routes = readFileSync(join(import.meta.dirname, '../../src/inference/routes.ts'), 'utf8');
  t.match(routes, /route\('GET', +'\/health', +publicAccess/);
  for (const probe of ['readinessProbe', 'startupProbe', 'livenessProbe']) {
    t.same(container[probe].httpGet, { path: '/health', port: 'http' }, probe);
  }
});

t.test('--cache-disk is a writable volume of its own', async (t) => {
  const mount = container.volumeMounts.find((m: Doc) => m.mountPath === argValue('--cache-disk'));
  t.ok(mount, 'mounted where --cache-disk points');
  t.notOk(mount.readOnly);
  t.ok(deployment.spec.template.spec.volumes.some((v: Doc) => v.name === mount.name));
});

t.test('the endpoint picker reads this server\'s gauges by the pods\' engine-type label', async (t) => {
  const plugin = eppConfig.plugins.find((p: Doc) => p.type === 'model-server-protocol-metrics');
  const key = plugin.parameters.engineLabelKey;
  const engine = plugin.parameters.engineConfigs.find((e: Doc) => e.name === deployment.spec.template.metadata.labels[key]);
  t.ok(engine, 'the pods\' label names an engine config');
  const text = metricsText(new MetricsLedger().scrape(null), { requests: 0, errors: 0 }) + modelServerMetricsText({
    slotTokens: [0], nCtx: 4096, adapters: ['a'], runningAdapters: [], waitingAdapters: [], blockSize: 16, now: 1,
  });
  const families = parseMetrics(text);
  for (const spec of ['queuedRequestsSpec', 'runningRequestsSpec', 'kvUsageSpec', 'loraSpec', 'cacheInfoSpec']) {
    const name = engine[spec];
    t.ok(families.get(name)?.type === 'GAUGE', `${spec}: ${name} is a gauge of /metrics`);
  }
  t.same(Object.keys(families.get(engine.loraSpec)!.metrics[0]!.labels!).sort(), ['max_lora', 'running_lora_adapters', 'waiting_lora_adapters']);
  t.same(Object.keys(families.get(engine.cacheInfoSpec)!.metrics[0]!.labels!).sort(), ['block_size', 'num_gpu_blocks']);
});
