// Router mode's handlers (llama-server's server_models_routes): requests that use a model are
// forwarded to its child (the model named by the body's "model", or by ?model= on GET routes),
// which is loaded first unless --no-models-autoload (or ?autoload=false); the model list and its
// load, unload and event routes are answered here.
import type { EventStream } from '../../http/event-stream.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { readMultipartForm } from '../../http/multipart.js';
import { parseJson } from '../../http/validation.js';
import { native } from '../../native/binding.js';
import { ErrorType, badRequest, inferenceError } from '../errors.js';
import { listedStatus, modelInfo, modelNotFound, modelProcess, ModelRegistry, type ModelEntry, type ModelEvent } from './model-registry.js';
import { CONVERSATION_HEADER } from '../streams/resumable.js';
import type { ConversationOwners } from './conversation-owners.js';
import { forward } from './proxy.js';
import type { RequestTenant } from '../tenants/tenancy.js';
import type { CacheModels } from './cache-models.js';

export interface RouterSettings {
  /** --models-autoload (default) / --no-models-autoload. */
  autoload: boolean;
  buildInfo: string;
  /** Aborted when the server shuts down: ends the /models/sse streams. */
  closing: AbortSignal;
}

export interface RouterHandlers {
  /** A POST that uses a model, for the tenant the router admitted. */
  proxyPost(tenant: RequestTenant, req: HttpRequest): Promise<HttpResult | void>;
  proxyGet(req: HttpRequest): Promise<HttpResult | void>;
  props(req: HttpRequest): Promise<HttpResult | void>;
  listModels(req: HttpRequest): Promise<HttpResult>;
  loadModel(req: HttpRequest): Promise<HttpResult>;
  unloadModel(req: HttpRequest): HttpResult;
  modelEvents(req: HttpRequest): Promise<void>;
  /** POST /models {model}: downloads a model by its hub name into the cache. */
  addModel(req: HttpRequest): Promise<HttpResult>;
  /** DELETE /models?model=: removes a cache model (its download cancelled, its process stopped). */
  removeModel(req: HttpRequest): Promise<HttpResult>;
}

/** ?autoload=true|1|false|0 overrides the server's setting for one request. */
function autoloadOf(req: HttpRequest, settings: RouterSettings): boolean {
  const value = req.query.get('autoload');
  if (value === null || value === '') return settings.autoload;
  return value === 'true' || value === '1';
}

/** The "model" a POST names: a JSON body's field, or a multipart form's (the transcription upload). */
async function postedModel(req: HttpRequest): Promise<string> {
  const form = await readMultipartForm(req);
  if (!form) return bodyModel(req);
  const model = form.get('model');
  if (model !== null && typeof model !== 'string') throw badRequest('"model" must be a string');
  return model ?? '';
}

/** The `model` field of a JSON body ("" when absent); a body that is not JSON is a 400. */
function bodyModel(req: HttpRequest): string {
  const body = parseJson(req, false);
  const model = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)['model'] : undefined;
  if (model !== undefined && typeof model !== 'string') throw badRequest('"model" must be a string');
  return model ?? '';
}

/** The model a request names, as llama-server's router_validate_model checks it. */
function requestedModel(registry: ModelRegistry, name: string, autoload: boolean): ModelEntry {
  if (name === '') throw badRequest('model name is missing from the request');
  const entry = registry.find(name);
  if (!entry) throw modelNotFound(name);
  if (!autoload && !ModelRegistry.isRunning(entry)) throw badRequest('model is not loaded');
  return entry;
}

async function proxyTo(registry: ModelRegistry, req: HttpRequest, entry: ModelEntry, autoload: boolean, isPost: boolean, tenant: RequestTenant | null): Promise<HttpResult | void> {
  // A sleeping model wakes for a request even without autoload, as llama-server's sleeping child does.
  const { port, release } = await registry.use(entry, autoload || entry.state.name === 'sleeping', req.signal, isPost);
  try {
    return await forward(req, port, entry.spec.name, tenant);
  } finally {
    release();
  }
}

const projectorCaps = new Map<string, { vision: boolean; audio: boolean }>();

/** What a model takes, as llama-server's router lists it: its projector file's capabilities (read once per file). */
function inputModalities(mmproj: string): string[] {
  if (mmproj === '') return ['text'];
  let caps = projectorCaps.get(mmproj);
  if (!caps) {
    caps = native.Vision.capabilities(mmproj);
    // A file not there yet (a download) is read again next time.
    if (caps.vision || caps.audio) projectorCaps.set(mmproj, caps);
  }
  return ['text', ...(caps.vision ? ['image'] : []), ...(caps.audio ? ['audio'] : [])];
}

/** Never aborts: a conversation's request waits for its model even when its client left. */
const NEVER = new AbortController().signal;

/**
 * A POST naming its conversation: its model is remembered before the load wait, so the stream
 * routes find the child and a stop during the load cancels it (a 400, as llama-server). The
 * client going away does not cancel it: the child's session must still get the generation.
 */
async function proxyConversation(registry: ModelRegistry, owners: ConversationOwners, req: HttpRequest, entry: ModelEntry, autoload: boolean, tenant: RequestTenant): Promise<HttpResult | void> {
  const conversationId = req.headers[CONVERSATION_HEADER]!;
  const ticket = owners.remember(conversationId, entry.spec.name);
  const { port, release } = await registry.use(entry, autoload || entry.state.name === 'sleeping', NEVER, true);
  try {
    if (!owners.alive(conversationId, ticket)) throw badRequest('request cancelled by a stop while the model was loading');
    return await forward(req, port, entry.spec.name, tenant);
  } finally {
    release();
  }
}

/** GET /models: every model with its state (llama-server's listing). */
function modelListing(entry: ModelEntry, created: number): Record<string, unknown> {
  const status: Record<string, unknown> = { value: listedStatus(entry), args: entry.args, preset: entry.spec.presetIni };
  const state = entry.state;
  if (state.name === 'unloaded' && state.exitCode !== 0) Object.assign(status, { exit_code: state.exitCode, failed: true, ...(state.failure ? { message: state.failure } : {}) });
  const listing: Record<string, unknown> = {
    id: entry.spec.name,
    aliases: entry.spec.aliases,
    tags: entry.spec.tags,
    object: 'model',
    owned_by: 'llamacpp',
    created,
    status,
    architecture: { input_modalities: inputModalities(entry.spec.mmproj), output_modalities: ['text'] },
    source: entry.spec.source,
    can_remove: entry.spec.source === 'cache',
  };
  const info = modelInfo(entry);
  if (info) {
    for (const [key, value] of Object.entries(info)) if (!(key in listing)) listing[key] = value;
  }
  return listing;
}

function modelField(req: HttpRequest): string {
  const name = bodyModel(req);
  if (name === '') throw badRequest('model name is missing from the request');
  return name;
}

/** A model POST /models is downloading, listed as llama-server lists it meanwhile. */
function downloadListing(name: string, created: number): Record<string, unknown> {
  return {
    id: name, aliases: [], tags: [], object: 'model', owned_by: 'llamacpp', created,
    status: { value: 'downloading', args: [] }, architecture: { input_modalities: ['text'], output_modalities: ['text'] },
    source: 'cache', can_remove: true,
  };
}

export function routerHandlers(registry: ModelRegistry, settings: RouterSettings, owners: ConversationOwners, downloads: CacheModels): RouterHandlers {
  const proxyGet = (req: HttpRequest): Promise<HttpResult | void> => {
    const autoload = autoloadOf(req, settings);
    return proxyTo(registry, req, requestedModel(registry, req.query.get('model') ?? '', autoload), autoload, false, null);
  };
  return {
    proxyGet,
    proxyPost: async (tenant, req) => {
      const autoload = autoloadOf(req, settings);
      const entry = requestedModel(registry, await postedModel(req), autoload);
      if (req.headers[CONVERSATION_HEADER]) return proxyConversation(registry, owners, req, entry, autoload, tenant);
      return proxyTo(registry, req, entry, autoload, true, tenant);
    },
    props: async (req) => {
      if (req.query.get('model')) return proxyGet(req);
      return {
        body: {
          role: 'router',
          max_instances: registry.modelsMax,
          models_autoload: settings.autoload,
          model_alias: 'llama-server',
          model_path: 'none',
          default_generation_settings: { params: {}, n_ctx: 0 },
          ui_settings: {},
          build_info: settings.buildInfo,
          cors_proxy_enabled: false,
        },
      };
    },
    listModels: async (req) => {
      if (req.query.get('reload')) await registry.reload();
      const created = Math.floor(Date.now() / 1000);
      const listed = registry.list().filter((e) => !e.spec.hidden).map((e) => modelListing(e, created));
      return { body: { data: [...listed, ...downloads.names().map((name) => downloadListing(name, created))], object: 'list' } };
    },
    loadModel: async (req) => {
      const name = modelField(req);
      const entry = registry.find(name);
      if (!entry) throw inferenceError(ErrorType.NOT_FOUND, 'model is not found');
      if (modelProcess(entry) !== null) throw badRequest('model is already running');
      await registry.load(entry);
      return { body: { success: true } };
    },
    unloadModel: (req) => {
      const entry = registry.find(modelField(req));
      if (!entry) throw badRequest('model is not found');
      if (!ModelRegistry.isRunning(entry)) throw badRequest('model is not running');
      registry.unload(entry);
      return { body: { success: true } };
    },
    modelEvents: (req) => streamModelEvents(registry, req, settings.closing),
    addModel: async (req) => {
      const name = bodyModel(req);
      if (name === '') throw badRequest('model must be a non-empty string');
      await downloads.start(name);
      return { body: { success: true } };
    },
    removeModel: async (req) => {
      const name = req.query.get('model') ?? '';
      if (name === '') throw badRequest('model must be a non-empty string');
      await downloads.remove(name);
      return { body: { success: true } };
    },
  };
}

/** GET /models/sse: one `data: {model, event, data}` event per state change, until the client or the server goes. */
async function streamModelEvents(registry: ModelRegistry, req: HttpRequest, closing: AbortSignal): Promise<void> {
  const stream: EventStream = req.openEventStream();
  const pending: ModelEvent[] = [];
  let wake: (() => void) | null = null;
  const onEvent = (event: ModelEvent): void => {
    pending.push(event);
    wake?.();
  };
  const onEnd = (): void => wake?.();
  registry.on('event', onEvent);
  req.signal.addEventListener('abort', onEnd);
  closing.addEventListener('abort', onEnd);
  try {
    // The status line goes out with the first write: a comment opens the stream at once.
    await stream.sendRaw(': connected\n\n', true);
    while (!req.signal.aborted && !closing.aborted && !stream.closed) {
      const event = pending.shift();
      if (event) {
        await stream.send(JSON.stringify(event));
      } else {
        await new Promise<void>((resolve) => (wake = resolve));
      }
      wake = null;
    }
  } finally {
    registry.off('event', onEvent);
    req.signal.removeEventListener('abort', onEnd);
    closing.removeEventListener('abort', onEnd);
  }
}
