// Splitting a batch sent to auth-server over HTTP (POST /fleet/exchange, POST /fleet/usage) into
// requests that fit the service's 16 KiB body limit: items in order, each request's items
// summing to at most REQUEST_BODY_CHARS characters of JSON.

/** The characters of JSON one request's items take at most: under the 16 KiB body limit with the request's own fields. */
export const REQUEST_BODY_CHARS = 12_000;

/**
 * `items` in runs of at most `maxChars` characters of JSON each (an item is counted as the JSON
 * of `asJson(item)`, what the request carries of it, and a comma); an item larger than that
 * alone goes alone. Always at least one run (maybe empty).
 */
export function chunkByJsonSize<T>(items: readonly T[], asJson: (item: T) => unknown = (item) => item, maxChars = REQUEST_BODY_CHARS): T[][] {
  const out: T[][] = [[]];
  let size = 0;
  for (const item of items) {
    const chars = JSON.stringify(asJson(item)).length + 1;
    if (size + chars > maxChars && out[out.length - 1]!.length > 0) {
      out.push([]);
      size = 0;
    }
    size += chars;
    out[out.length - 1]!.push(item);
  }
  return out;
}
