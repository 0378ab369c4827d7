/**
 * Compute threads of every test server, ours and llama-server: one (servers a test spawns get it
 * from LLAMA_ARG_THREADS=1, which npm test sets through tap's test-env). The suite runs four files at
 * once on two cores, and ggml's workers spin while they wait for each other, so a second thread
 * per server only takes the core from the other file's server. Thread count does not change a
 * greedy answer: ggml splits a matrix product by rows, each row computed whole by one thread.
 */
export const TEST_THREADS = 1;
