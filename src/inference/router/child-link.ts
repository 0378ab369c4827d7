// The link between a router and one of its model processes (llama-server's server_child): Node's
// IPC channel, opened by the router when it spawns the child with ROUTER_CHILD_ENV set.
//   child -> router  {type: "listening", port}   the port is open
//                    {type: "ready", info}       the model is loaded; info is its /v1/models entry
//   router -> child  {type: "exit"}              shut down (the router kills it after its stop timeout)
// A child whose router has gone (the channel closes) exits at once, as llama-server's children do
// on EOF of their stdin.

export const ROUTER_CHILD_ENV = 'INFERENCE_SERVER_ROUTER_CHILD';

export type ChildMessage =
  | { type: 'listening'; port: number }
  | { type: 'ready'; info: Record<string, unknown> }
  | { type: 'exit' };

export interface RouterLink {
  listening(port: number): void;
  ready(info: Record<string, unknown>): void;
}

/** The link to the router when this process is a router's model process, else null. */
export function routerLink(shutdown: () => void): RouterLink | null {
  if (process.env[ROUTER_CHILD_ENV] !== '1' || !process.send) return null;
  process.on('message', (message: ChildMessage) => {
    if (message.type === 'exit') shutdown();
  });
  process.on('disconnect', () => process.exit(1));
  const send = (message: ChildMessage): void => {
    process.send?.(message, undefined, {}, () => {});
  };
  return {
    listening: (port) => send({ type: 'listening', port }),
    ready: (info) => send({ type: 'ready', info }),
  };
}
