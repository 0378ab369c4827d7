// Reading a chunked HTTP response as a client that hands over only whole chunks does (Python's
// urllib3, under `requests` and llama.cpp's Python tests): a chunk's data counts once its closing
// CRLF has arrived.

/**
 * The body of the chunked response in `received` (raw bytes as latin1 text, headers included) made
 * of the chunks complete so far, and whether the terminating chunk has arrived.
 */
export function wholeChunks(received: string): { body: string; ended: boolean } {
  let at = received.indexOf('\r\n\r\n');
  if (at < 0) return { body: '', ended: false };
  at += 4;
  let body = '';
  for (;;) {
    const lineEnd = received.indexOf('\r\n', at);
    if (lineEnd < 0) return { body, ended: false };
    const size = parseInt(received.slice(at, lineEnd), 16);
    if (size === 0) return { body, ended: true };
    const dataEnd = lineEnd + 2 + size;
    if (received.length < dataEnd + 2) return { body, ended: false };
    if (received.slice(dataEnd, dataEnd + 2) !== '\r\n') throw new Error(`bad chunk framing at byte ${dataEnd}`);
    body += received.slice(lineEnd + 2, dataEnd);
    at = dataEnd + 2;
  }
}
