// llama.cpp's glob_match (common.cpp) and the tools' path_glob_match (server-tools.cpp), on
// '/'-separated relative paths: `*` and `?` stop at '/', `**` crosses it, `[...]` is a class
// (`!` negates, `a-z` ranges, a leading `]` or `-` is literal). Memoised, so a pattern of many
// stars costs pattern x path steps instead of llama.cpp's exponential recursion; answers are equal.

function classMatch(c: string, pattern: string, start: number, end: number): boolean {
  let i = start;
  let negated = false;
  if (pattern[i] === '!') {
    negated = true;
    i++;
  }
  if (pattern[i] === ']' || pattern[i] === '-') {
    if (i < end && pattern[i] === c) return !negated;
    i++;
  }
  let matched = false;
  while (i < end) {
    if (i + 2 < end && pattern[i + 1] === '-' && pattern[i + 2] !== ']') {
      if (c >= pattern[i]! && c <= pattern[i + 2]!) {
        matched = true;
        break;
      }
      i += 3;
    } else {
      if (pattern[i] === c) {
        matched = true;
        break;
      }
      i++;
    }
  }
  return negated ? !matched : matched;
}

/** common.cpp glob_match: the whole of `str` must match `pattern`. */
export function globMatch(pattern: string, str: string): boolean {
  const memo = new Map<number, boolean>();
  const width = str.length + 1;
  const match = (p: number, s: number): boolean => {
    const key = p * width + s;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const result = step(p, s);
    memo.set(key, result);
    return result;
  };
  const step = (p: number, s: number): boolean => {
    if (p === pattern.length) return s === str.length;
    const pc = pattern[p]!;
    if (pc === '*' && pattern[p + 1] === '*') {
      if (match(p + 2, s)) return true;
      return s < str.length ? match(p, s + 1) : false;
    }
    if (pc === '*') {
      let i = s;
      for (; i < str.length && str[i] !== '/'; i++) {
        if (match(p + 1, i)) return true;
      }
      return match(p + 1, i);
    }
    if (pc === '?' && s < str.length && str[s] !== '/') return match(p + 1, s + 1);
    if (pc === '[') {
      let end = p + 1;
      if (pattern[end] === ']' || pattern[end] === '-') end++;
      while (end < pattern.length && pattern[end] !== ']') end++;
      if (end < pattern.length) {
        if (s >= str.length) return false;
        return classMatch(str[s]!, pattern, p + 1, end) && match(end + 1, s + 1);
      }
      return str[s] === '[' ? match(p + 1, s + 1) : false;
    }
    return s < str.length && pc === str[s] ? match(p + 1, s + 1) : false;
  };
  return match(0, 0);
}

/**
 * A pattern with no '/' matches the basename at any depth; one with '/' matches the whole
 * relative path, anchored with "**\/" unless it starts with "**", "**\/" or '/'.
 */
export function pathGlobMatch(pattern: string, relPath: string): boolean {
  if (!pattern.includes('/')) return globMatch(pattern, relPath.slice(relPath.lastIndexOf('/') + 1));
  if (pattern === '**' || pattern.startsWith('**/') || pattern.startsWith('/')) return globMatch(pattern, relPath);
  return globMatch(`**/${pattern}`, relPath);
}
