// llama.cpp's fs_validate_filename (common/common.cpp, without subdirectories): the names
// llama-server accepts for slot files. A refused name is a 400 "Invalid filename" there and here.

const MAX_BYTES = 255;
const ILLEGAL = new Set([':', '*', '?', '"', '<', '>', '|', '/', '\\']);

function forbiddenCodePoint(c: number): boolean {
  return c <= 0x1f || c === 0x7f || (c >= 0x80 && c <= 0x9f) // control characters
    || c === 0xff0e || c === 0x2215 || c === 0x2216 // look-alikes of '.', '/' and '\'
    || (c >= 0xd800 && c <= 0xdfff) // lone surrogates
    || c === 0xfffd || c === 0xfeff; // replacement character, byte order mark
}

/** True when `name` is one plain file name llama-server would accept under --slot-save-path. */
export function isValidSlotFilename(name: string): boolean {
  if (name.length === 0 || Buffer.byteLength(name, 'utf8') > MAX_BYTES) return false;
  for (const ch of name) {
    if (ILLEGAL.has(ch) || forbiddenCodePoint(ch.codePointAt(0)!)) return false;
  }
  // Windows strips these, so they would name another file; ".." anywhere is refused outright.
  if (name.startsWith(' ') || name.endsWith(' ') || name.endsWith('.')) return false;
  return !name.includes('..') && name !== '.';
}
