// The status panel: model (from /props), busy and idle slots (/slots, polled every second
// while the tab is visible), the speed of the last answer (its timings) and the server's
// average generation speed (/metrics, when the server runs with --metrics).
import { KeyRequired, type InferenceApi, type Props } from './api.js';

const POLL_MS = 1000;

export class StatusPanel {
  private timer: number | undefined;
  private metricsOff = false;

  constructor(private readonly api: InferenceApi, private readonly onKeyRequired: () => void) {}

  showModel(props: Props): void {
    text('status-model', `${props.model_alias} · context ${props.n_ctx}`);
  }

  showLastAnswer(tokens: number, perSecond: number, stopped: boolean): void {
    text('status-last', `${perSecond.toFixed(1)} tokens/s · ${tokens} tokens${stopped ? ' (stopped)' : ''}`);
  }

  /** Polls until the page is closed; refresh() answers at once (after a send or a stop). */
  start(): void {
    document.addEventListener('visibilitychange', () => { if (!document.hidden) void this.refresh(); });
    void this.refresh();
  }

  async refresh(): Promise<void> {
    window.clearTimeout(this.timer);
    try {
      const slots = await this.api.slots();
      const busy = slots.filter((s) => s.is_processing).length;
      const slotsElement = text('status-slots', `${busy} busy · ${slots.length - busy} idle`);
      slotsElement.dataset.busy = String(busy);
      slotsElement.dataset.idle = String(slots.length - busy);
      if (!this.metricsOff) this.showMetrics(await this.api.metrics());
    } catch (error) {
      if (error instanceof KeyRequired) return this.onKeyRequired();
      text('status-slots', 'unavailable');
    }
    if (!document.hidden) this.timer = window.setTimeout(() => void this.refresh(), POLL_MS);
  }

  private showMetrics(metrics: Map<string, number> | null): void {
    if (!metrics) {
      this.metricsOff = true;
      text('status-metrics', 'metrics off (start the server with --metrics)');
      return;
    }
    // The average since start-up, from the counters: the gauge covers only the window since the
    // previous scrape, which another scraper (Prometheus) may have taken.
    const total = metrics.get('tokens_predicted_total') ?? 0;
    const seconds = metrics.get('tokens_predicted_seconds_total') ?? 0;
    const speed = seconds > 0 ? total / seconds : 0;
    text('status-metrics', `${speed.toFixed(1)} tokens/s · ${total} tokens generated`);
  }
}

function text(id: string, value: string): HTMLElement {
  const element = document.getElementById(id)!;
  element.textContent = value;
  return element;
}
