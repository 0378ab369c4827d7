// std::getline over a whole text: lines split on '\n', a final newline ends the last line
// instead of starting an empty one.

export function getlines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}
