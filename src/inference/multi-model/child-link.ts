// The link between a router and one of its model processes (llama-server's server_child): Node's
// IPC channel, opened by the router when it spawns the child with ROUTER_CHILD_ENV set. The
// process reads that once, at start-up (startedByRouter, server-main.ts); what it decides is an
// option from there on (server.ts routerChild).
//   child -> router  {type: "listening", port}   the port is open
//                    {type: "ready", info}       the model is loaded; info is its /v1/models entry
//                    {type: "usage", tokens, entries}  what the tenants the router forwarded used
//                                                since the last report (at most every 200 ms), for
//                                                their limits and usage in the router
//   router -> child  {type: "start", args}       (a spare only) serve the model of this command line
//                    {type: "elsewhere", tokens} what the tenants used on the router's other model
//                                                processes (their usage reports), charged to their
//                                                fair share here: the share holds across the models
//                    {type: "exit"}              shut down (the router kills it after its stop timeout)
// A spare (ROUTER_SPARE_ENV also set) is a model process started ahead of need: Node, the server's
// modules and the addon are loaded, and it waits for its command line, so that a model load
// does not pay for process start-up.
// A child whose router has gone (the channel closes) exits at once, as llama-server's children do
// on EOF of their stdin.

import type { UsageReporter } from '../tenants/tenancy.js';
import type { UsageEntry } from '../tenants/usage-meter.js';

export const ROUTER_CHILD_ENV = 'INFERENCE_SERVER_ROUTER_CHILD';
export const ROUTER_SPARE_ENV = 'INFERENCE_SERVER_ROUTER_SPARE';

export type ChildMessage =
  | { type: 'listening'; port: number }
  | { type: 'ready'; info: Record<string, unknown> }
  | { type: 'usage'; tokens: Array<[string, number]>; entries: UsageEntry[] }
  | { type: 'start'; args: string[] }
  | { type: 'elsewhere'; tokens: Array<[string, number]> }
  | { type: 'exit' };

/** How often a model process reports its tenants' usage to the router. */
const USAGE_REPORT_MS = 200;

/** How this process was started: by a router, as a model process (a spare or not), or null: not by a router. */
export interface RouterChild {
  /** Started ahead of need: it waits for its command line (spareCommandLine). */
  spare: boolean;
}

/** Read once at start-up: whether a router started this process as one of its model processes. */
export function startedByRouter(): RouterChild | null {
  if (process.env[ROUTER_CHILD_ENV] !== '1' || !process.send) return null;
  const spare = process.env[ROUTER_SPARE_ENV] === '1';
  // Not passed on to what this process starts.
  delete process.env[ROUTER_SPARE_ENV];
  return { spare };
}

/** In a router's model process: a reporter of tenants' usage to the router (batched). */
export function routerUsageReporter(): UsageReporter {
  let tokens = new Map<string, number>();
  let entries: UsageEntry[] = [];
  let timer: NodeJS.Timeout | null = null;
  const send = (): void => {
    timer = null;
    const message: ChildMessage = { type: 'usage', tokens: [...tokens.entries()], entries };
    tokens = new Map();
    entries = [];
    process.send?.(message, undefined, {}, () => {});
  };
  const schedule = (): void => {
    timer ??= setTimeout(send, USAGE_REPORT_MS);
  };
  return {
    tokens: (tenant, n) => {
      tokens.set(tenant, (tokens.get(tenant) ?? 0) + n);
      schedule();
    },
    usage: (entry) => {
      entries.push(entry);
      schedule();
    },
  };
}

export interface RouterLink {
  listening(port: number): void;
  ready(info: Record<string, unknown>): void;
  /** Where the tenants' use of the router's other model processes goes (once the model is loaded). */
  onElsewhere(charge: (tokens: Array<[string, number]>) => void): void;
}

/** In a router's model process: the link to the router. */
export function routerLink(shutdown: () => void): RouterLink {
  let charge: ((tokens: Array<[string, number]>) => void) | null = null;
  process.on('message', (message: ChildMessage) => {
    if (message.type === 'exit') shutdown();
    else if (message.type === 'elsewhere') charge?.(message.tokens);
  });
  process.on('disconnect', () => process.exit(1));
  const send = (message: ChildMessage): void => {
    process.send?.(message, undefined, {}, () => {});
  };
  return {
    listening: (port) => send({ type: 'listening', port }),
    ready: (info) => send({ type: 'ready', info }),
    onElsewhere: (next) => { charge = next; },
  };
}

/** In a spare: resolves with the command line the router sends (the process exits if the router goes first). */
export function spareCommandLine(): Promise<string[]> {
  return new Promise((resolve) => {
    const gone = (): void => process.exit(0);
    const onMessage = (message: ChildMessage): void => {
      if (message.type === 'exit') process.exit(0);
      if (message.type !== 'start') return;
      process.off('message', onMessage);
      process.off('disconnect', gone);
      resolve(message.args);
    };
    process.on('message', onMessage);
    process.on('disconnect', gone);
  });
}
