// Whether the publisher binds its endpoint or connects to it, by vLLM's ZmqEventPublisher rule:
// an endpoint that names no host (a wildcard, ipc://, inproc://) is bound here; one that names a
// host is the subscriber's address, and is connected to (llm-d's subscriber binds, each model
// server connects to it). A wildcard address (0.0.0.0, ::) names no host either.

export type EndpointMode = 'bind' | 'connect';

export function endpointMode(endpoint: string): EndpointMode {
  if (endpoint.startsWith('ipc://') || endpoint.startsWith('inproc://')) return 'bind';
  if (endpoint.includes('*') || endpoint.includes('::')) return 'bind';
  const host = /^tcp:\/\/([^:/]+):\d+$/.exec(endpoint)?.[1];
  return host === '0.0.0.0' ? 'bind' : 'connect';
}

/** A ZMQ endpoint this publisher can use: tcp://host:port, tcp://*:port, ipc://path or inproc://name. */
export function isEndpoint(text: string): boolean {
  return /^tcp:\/\/(\*|\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):\d{1,5}$/.test(text) || /^(ipc|inproc):\/\/.+$/.test(text);
}
