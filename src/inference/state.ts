// Server state: `loading` until the model and engine are ready, then `ready`. The HTTP port is
// open in both states; every route but health answers 503 "Loading model" while loading.
import { loadingModel } from './errors.js';
import type { InferenceService } from './service/service.js';

/** Requests counted for /metrics: every routed request, and those answered with an error. */
export interface RequestCounters {
  requests: number;
  errors: number;
}

export class ServerState {
  private service: InferenceService | null = null;
  /** Model loading progress, 0..1. */
  progress = 0;
  readonly counters: RequestCounters = { requests: 0, errors: 0 };

  get isReady(): boolean {
    return this.service !== null;
  }

  setReady(service: InferenceService): void {
    this.service = service;
    this.progress = 1;
  }

  /** The service, or a 503 while the model is loading. */
  ready(): InferenceService {
    if (!this.service) throw loadingModel();
    return this.service;
  }

  take(): InferenceService | null {
    const s = this.service;
    this.service = null;
    return s;
  }
}
