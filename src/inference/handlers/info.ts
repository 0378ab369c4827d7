// GET /health, /v1/models, /props, /slots, /metrics, and POST /props. None of them wakes a
// sleeping server: they answer from what it showed before it slept.
import type { UsageMeter } from '../tenants/usage-meter.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { modelsBody, propsBody, slotsBody } from '../dialects/server-info.js';
import { ErrorType, inferenceError } from '../errors.js';
import type { ServiceHost, ServiceView } from '../service/host.js';

/** Public: 503 while the model first loads, then ok (asleep too). */
export function handleHealth(host: ServiceHost): HttpResult {
  host.view();
  return { body: { status: 'ok' } };
}

export function handleModels(view: ServiceView): HttpResult {
  return { body: view.asleep ? view.snapshot.models : modelsBody(view.service) };
}

export function handleProps(view: ServiceView): HttpResult {
  return { body: view.asleep ? view.snapshot.props : propsBody(view.service, false) };
}

/** POST /props (with --props): llama-server accepts it and changes nothing yet; so does this server. */
export function handleSetProps(): HttpResult {
  return { body: { success: true } };
}

/** GET /slots; with ?fail_on_no_slot, 503 when every slot is busy (as llama-server). */
export function handleSlots(view: ServiceView, req: HttpRequest): HttpResult {
  const slots = view.asleep ? view.snapshot.slots : slotsBody(view.service);
  if (req.query.get('fail_on_no_slot') && slots.every((s) => (s as { is_processing: boolean }).is_processing)) {
    throw inferenceError(ErrorType.UNAVAILABLE, 'no slot available');
  }
  return { body: slots };
}

/** Prometheus text of the engine's and the server's counters. */
/** llama-server's series, then the per-tenant ones (tenants/usage-meter.ts). */
export function metricsHandler(host: ServiceHost, usage: UsageMeter) {
  return (view: ServiceView): HttpResult => ({
    text: host.metrics(view) + usage.metricsText(),
    contentType: 'text/plain; version=0.0.4',
    // As llama-server: scrapers tell a restart from a counter reset by it.
    headers: { 'Process-Start-Time-Unix': String(PROCESS_START_SECONDS) },
  });
}

const PROCESS_START_SECONDS = Math.floor((Date.now() - performance.now()) / 1000);
