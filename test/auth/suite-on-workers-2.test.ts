// The auth suite with its routes served by worker threads, part 2 of 2 (fixtures/on-workers.ts).
import t from 'tap';
import { runOnWorkers } from './fixtures/on-workers.js';

runOnWorkers(t, 2, 2);
