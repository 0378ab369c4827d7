// Calls between auth-server's primary thread and one of its worker threads, over the Worker
// object (primary side) or parentPort (worker side). Each side implements the calls the other
// makes; every call is answered with the handler's value or its error message. Messages of one
// port arrive in the order they were posted, so an answer is never overtaken by a call made
// before it.

/** The two ends: a Worker in the primary thread, parentPort in a worker. */
export interface ChannelPort {
  postMessage(value: unknown): void;
  on(event: 'message', listener: (value: unknown) => void): unknown;
}

/** An interface whose members are all `(...args) => Promise<result>`. */
export type Calls<T> = { [K in keyof T]: (...args: never[]) => Promise<unknown> };

type Envelope =
  | { call: number; name: string; args: unknown[] }
  | { answer: number; value?: unknown; error?: string };

export class Channel<Remote extends Calls<Remote>, Local extends Calls<Local>> {
  private nextCall = 1;
  private readonly waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private closedBy: Error | null = null;

  constructor(private readonly port: ChannelPort, private readonly handlers: Local) {
    port.on('message', (message) => this.receive(message as Envelope));
  }

  /** Calls `name` on the other side; rejects with its error, or when the channel closes first. */
  call<K extends keyof Remote & string>(name: K, ...args: Parameters<Remote[K]>): ReturnType<Remote[K]> {
    return new Promise((resolve, reject) => {
      if (this.closedBy) {
        reject(this.closedBy);
        return;
      }
      const id = this.nextCall++;
      this.waiting.set(id, { resolve, reject });
      this.port.postMessage({ call: id, name, args } satisfies Envelope);
    }) as ReturnType<Remote[K]>;
  }

  /** The other side is gone (its thread exited): pending and later calls reject with `reason`. */
  close(reason: Error): void {
    this.closedBy ??= reason;
    for (const { reject } of this.waiting.values()) reject(reason);
    this.waiting.clear();
  }

  private receive(message: Envelope): void {
    if ('answer' in message) {
      const waiter = this.waiting.get(message.answer);
      this.waiting.delete(message.answer);
      if (message.error === undefined) waiter?.resolve(message.value);
      else waiter?.reject(new Error(message.error));
      return;
    }
    const handler = this.handlers[message.name as keyof Local] as unknown as ((...args: unknown[]) => Promise<unknown>) | undefined;
    const answer = (reply: Envelope): void => { this.port.postMessage(reply); };
    if (!handler) {
      answer({ answer: message.call, error: `no call named ${message.name}` });
      return;
    }
    handler.apply(this.handlers, message.args).then(
      (value) => answer({ answer: message.call, value }),
      (error: unknown) => answer({ answer: message.call, error: error instanceof Error ? error.message : String(error) }),
    );
  }
}
