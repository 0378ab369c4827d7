// How a streamed write is cut into HTTP chunks so that what a client must see now is complete
// on the wire now. uWS frames every write as one chunk and sends that chunk's closing CRLF only
// with the next write (or the response's end): a client that hands a chunk over only once it is
// complete (Python's urllib3 under `requests`, strict SSE parsers on it) would read every event
// one event late. So the last chunk of every write carries only bytes that may wait:
//  - whole events: the events, then EVENT_STREAM_TAIL (a blank line twice) as a chunk of its own.
//    To an SSE parser blank lines with no field before them dispatch nothing; a client that splits
//    the body on `\n\n` gets empty parts, which it already skips (splitting a body that ends with
//    an event always left one empty part at the end). The tail is completed by the next write or
//    the end of the response.
//  - other bytes (a body relayed piece by piece, e.g. a stream of ours, tails included): all but
//    the last byte, so the lines before it are complete; the bytes sent are those of the write,
//    only the framing differs.

/** The bytes written after whole events so that their own chunk is complete at once. */
export const EVENT_STREAM_TAIL = '\n\n';

/** The pieces to write, one uWS write (one HTTP chunk) each, in order. */
export function completingPieces(chunk: string | Uint8Array, wholeEvents: boolean): Array<string | Uint8Array> {
  if (wholeEvents) return [chunk, EVENT_STREAM_TAIL];
  // The last code point of a string: a surrogate pair stays whole.
  const tail = typeof chunk === 'string' && chunk.length >= 2 && isLowSurrogate(chunk.charCodeAt(chunk.length - 1)) ? 2 : 1;
  if (chunk.length <= tail) return [chunk];
  return [slice(chunk, 0, chunk.length - tail), slice(chunk, chunk.length - tail, chunk.length)];
}

function slice(chunk: string | Uint8Array, start: number, end: number): string | Uint8Array {
  return typeof chunk === 'string' ? chunk.slice(start, end) : chunk.subarray(start, end);
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
