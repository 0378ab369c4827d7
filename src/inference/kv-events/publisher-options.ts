// The publisher's settings and topic, apart from the ZMQ binding (zmq-publisher.ts), so that the
// command line can name them without loading zeromq.

export interface PublisherOptions {
  /** PUB endpoint: bound when it names no host (tcp://*:5557), connected to otherwise. */
  endpoint: string;
  /** ROUTER endpoint for replay (always bound), or none. */
  replayEndpoint: string | null;
  /** Batches kept for replay (vLLM's buffer_steps). */
  bufferSteps: number;
  /** PUB socket's send high-water mark (vLLM's hwm). */
  hwm: number;
  /** Batches waiting for the socket beyond which the oldest is dropped (vLLM's max_queue_size). */
  maxQueue: number;
}

/** vLLM's default endpoint (its KVEventsConfig): bound on every interface, port 5557. */
export const DEFAULT_ENDPOINT = 'tcp://*:5557';

export const DEFAULT_PUBLISHER_OPTIONS: Omit<PublisherOptions, 'endpoint'> = { replayEndpoint: null, bufferSteps: 10_000, hwm: 100_000, maxQueue: 100_000 };

/** The topic of a model's batches: `kv@<pod>@<model>`, the model named as routers name it. */
export function eventTopic(pod: string, model: string): string {
  return `kv@${pod}@${model}`;
}

