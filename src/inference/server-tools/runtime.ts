// Which ToolsIo a tool call uses (server-tools.cpp make_tools_io, make_tools_runtime). A call's
// runtime comes from its x-tool-runtime header, else from --tools-runtime, else it runs on this
// host. Runtimes: "docker-container:<id>" / "podman-container:<id>" (a running container),
// "ssh:<target>", and for --tools-runtime only "docker:<image>" / "podman:<image>", a container
// this server starts (`<engine> run --rm -i <image> sh`, kept alive by its open stdin, started
// again if it dies) and stops when it closes. An unknown runtime fails: never the host instead.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { HostIo } from './host-io.js';
import { ContainerIo, SshIo } from './isolate-io.js';
import type { ToolsIo } from './tools-io.js';

/** A runtime that cannot be used: the call answers 500 with this message (as llama-server's runtime_error). */
export class ToolRuntimeError extends Error {}

interface ContainerSpec {
  bin: 'docker' | 'podman';
  /** The image when spawning, the container id when attaching. */
  arg: string;
  attach: boolean;
}

export function parseContainerSpec(spec: string): ContainerSpec | null {
  for (const bin of ['docker', 'podman'] as const) {
    if (spec.startsWith(`${bin}-container:`)) return { bin, arg: spec.slice(bin.length + 11), attach: true };
    if (spec.startsWith(`${bin}:`)) return { bin, arg: spec.slice(bin.length + 1), attach: false };
  }
  return null;
}

/** An id beginning with anything but a letter or digit could become an engine option (e.g. --privileged). */
export const isValidContainerId = (id: string): boolean => /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id);

/** The ToolsIo of one call: `runtime` "" is this host; `cwd` "" the server's working directory. */
export function makeToolsIo(runtime: string, cwd: string): ToolsIo {
  if (runtime === '') return new HostIo(cwd);
  const container = parseContainerSpec(runtime);
  if (container) {
    // Spawning belongs to the runtime that owns the container; a call only attaches.
    if (!container.attach) throw new ToolRuntimeError(`tool runtime must name a running container: ${runtime}`);
    if (!isValidContainerId(container.arg)) throw new ToolRuntimeError(`invalid container id: ${container.arg}`);
    return new ContainerIo(container.bin, container.arg, cwd);
  }
  if (runtime.startsWith('ssh:')) {
    const target = runtime.slice(4);
    if (!SshIo.isValidTarget(target)) throw new ToolRuntimeError(`invalid ssh target: ${target}`);
    return new SshIo(target, cwd);
  }
  throw new ToolRuntimeError(`unknown tool runtime: ${runtime}`);
}

/** --tools-runtime: the runtime spec of each call. */
export interface ToolsRuntime {
  spec(): Promise<string>;
  close(): Promise<void>;
}

/** A container this server runs for the tools and removes when it closes. */
class OwnedContainer implements ToolsRuntime {
  private child: ChildProcess | null = null;
  private containerId = '';
  private starting: Promise<void> | null = null;

  constructor(private readonly bin: string, private readonly image: string) {}

  async spec(): Promise<string> {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) {
      this.starting ??= this.spawn().finally(() => {
        this.starting = null;
      });
      await this.starting;
    }
    return `${this.bin}-container:${this.containerId}`;
  }

  /** Closing stdin ends the container's shell (its pid 1); --rm then removes it. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.stdin?.end();
    await exited;
  }

  async spawn(): Promise<void> {
    const cidfile = path.join(tmpdir(), `llama-tools-runtime-cid-${process.pid}-${Date.now()}.tmp`);
    await rm(cidfile, { force: true });
    const child = spawn(this.bin, ['run', '--rm', '-i', '--cidfile', cidfile, this.image, 'sh'], { stdio: ['pipe', 'ignore', 'ignore'] });
    const failed = new Promise<boolean>((resolve) => child.once('error', () => resolve(true)));
    this.child = child;
    let cid = '';
    // The engine writes the container id to the cidfile once the container runs: up to 10 s.
    for (let i = 0; i < 100 && cid === ''; i++) {
      cid = (await readFile(cidfile, 'utf8').catch(() => '')).split('\n')[0]!.trim();
      if (cid === '' && (await Promise.race([failed, delay(100).then(() => false)]))) break;
    }
    await rm(cidfile, { force: true });
    if (cid === '') {
      child.kill('SIGKILL');
      throw new ToolRuntimeError(child.pid === undefined
        ? `failed to spawn ${this.bin} container for tools runtime (image: ${this.image})`
        : `timed out waiting for ${this.bin} container to start (image: ${this.image})`);
    }
    this.containerId = cid;
  }
}

/** Checks --tools-runtime at start-up (and starts the container it asks for); null for none. */
export async function startToolsRuntime(spec: string): Promise<ToolsRuntime | null> {
  if (spec === '') return null;
  const container = parseContainerSpec(spec);
  if (container && !container.attach) {
    if (container.arg === '') throw new ToolRuntimeError(`--tools-runtime ${container.bin}:<image> requires an image name`);
    const owned = new OwnedContainer(container.bin, container.arg);
    await owned.spawn();
    return owned;
  }
  makeToolsIo(spec, ''); // nothing to own: only refuse a bad spec now
  return { spec: () => Promise.resolve(spec), close: () => Promise.resolve() };
}
