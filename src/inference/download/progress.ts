// Download progress, shown as llama.cpp's download.cpp shows it on a terminal (one bar per file,
// redrawn in place: "Downloading NAME ────────╴    42%"), and in logs, where nothing is redrawn,
// as one line per 10%.

export interface DownloadProgress {
  /** The file's name (the last part of its URL, without the query). */
  name: string;
  url: string;
  downloaded: number;
  /** 0 when the server did not say. */
  total: number;
}

/** Receives a download's progress; router mode turns it into /models/sse events. */
export interface ProgressSink {
  start(p: DownloadProgress): void;
  update(p: DownloadProgress): void;
  done(p: DownloadProgress, ok: boolean): void;
}

export const NO_PROGRESS: ProgressSink = { start() {}, update() {}, done() {} };

/** The last part of a URL's path, as llama.cpp's ProgressBar names a file. */
export function fileNameOf(url: string): string {
  const noQuery = url.split('?')[0]!;
  return noQuery.slice(noQuery.lastIndexOf('/') + 1);
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** llama.cpp's ProgressBar: the bar's width shrinks as the name grows (names cut at 40 characters). */
export function terminalProgress(out: { write(s: string): unknown }): ProgressSink {
  let shown = '';
  let lastPct = -1;
  return {
    start(p) {
      const chars = [...p.name];
      shown = chars.length > 40 ? `${chars.slice(0, 39).join('')}…` : p.name;
      lastPct = -1;
    },
    update(p) {
      if (p.total <= 0) return;
      const pct = Math.floor((100 * p.downloaded) / p.total);
      if (pct === lastPct && p.downloaded !== p.total) return;
      lastPct = pct;
      const width = (55 - Math.min([...shown].length, 40)) * 2;
      const pos = Math.floor((width * p.downloaded) / p.total);
      let bar = '';
      for (let i = 0; i < width; i += 2) bar += i + 1 < pos ? '─' : i < pos ? '╴' : ' ';
      out.write(`\rDownloading ${shown} ${bar}${String(pct).padStart(4)}%\x1b[K`);
    },
    done(_p, ok) {
      if (lastPct >= 0) out.write(ok ? '\n' : ' failed\n');
    },
  };
}

/** One log line when a download starts, at every further 10%, and when it ends. */
export function logProgress(log: (line: string) => void): ProgressSink {
  let step = -1;
  return {
    start(p) {
      step = Math.floor((10 * p.downloaded) / Math.max(1, p.total));
      log(`downloading ${p.url}${p.total > 0 ? ` (${mib(p.total)}${p.downloaded > 0 ? `, resuming at ${mib(p.downloaded)}` : ''})` : ''}`);
    },
    update(p) {
      if (p.total <= 0) return;
      const now = Math.floor((10 * p.downloaded) / p.total);
      if (now <= step || now >= 10) return;
      step = now;
      log(`downloading ${p.name}: ${now * 10}% (${mib(p.downloaded)} of ${mib(p.total)})`);
    },
    done(p, ok) {
      log(ok ? `downloaded ${p.name} (${mib(p.downloaded)})` : `download of ${p.name} failed at ${mib(p.downloaded)}`);
    },
  };
}
