// edit_file: exact text replacements, all matched against the file as it was. Each old_text must
// be found (fuzzy-matched if not exactly, see fuzzy-match.ts) and be unique, edits must not
// overlap, and the result must differ from the file; otherwise nothing is written.
import { applyReplacements, applyReplacementsPreservingUnchangedLines, countOccurrences, normalizeForFuzzyMatch, type MatchedEdit } from './fuzzy-match.js';
import { asString, at, requiredString, toBytes, type Json } from './params.js';
import { functionDefinition, toolError, type ServerTool, type ToolCall } from './tool.js';

interface EditRequest {
  oldText: string;
  newText: string;
}

/** The edits as bytes, or an error answer. */
function readEdits(editsJson: Json): EditRequest[] | string {
  if (!Array.isArray(editsJson) || editsJson.length === 0) return '"edits" must be a non-empty array';
  const edits: EditRequest[] = [];
  for (const e of editsJson) {
    const oldText = toBytes(asString(at(e, 'old_text')));
    const newText = toBytes(asString(at(e, 'new_text')));
    if (oldText === '') return `edits[${edits.length}].old_text must not be empty`;
    edits.push({ oldText, newText });
  }
  return edits;
}

/** The edited content, or an error answer. */
function applyEdits(original: string, edits: readonly EditRequest[], path: string): string | { error: string } {
  const fuzzyOriginal = normalizeForFuzzyMatch(original);
  let anyFuzzy = false;
  for (let i = 0; i < edits.length; i++) {
    if (original.includes(edits[i]!.oldText)) continue;
    if (!fuzzyOriginal.includes(normalizeForFuzzyMatch(edits[i]!.oldText))) {
      return { error: `could not find edits[${i}].old_text in ${path}, it must match the file's current content exactly` };
    }
    anyFuzzy = true;
  }
  const base = anyFuzzy ? fuzzyOriginal : original;
  const matched: MatchedEdit[] = [];
  for (let i = 0; i < edits.length; i++) {
    const needle = anyFuzzy ? normalizeForFuzzyMatch(edits[i]!.oldText) : edits[i]!.oldText;
    // Uniqueness is always judged on normalised text: a duplicate differing only in whitespace counts.
    const occurrences = countOccurrences(fuzzyOriginal, normalizeForFuzzyMatch(edits[i]!.oldText));
    if (occurrences > 1) return { error: `found ${occurrences} occurrences of edits[${i}].old_text in ${path}, it must be unique` };
    matched.push({ editIndex: i, matchIndex: base.indexOf(needle), matchLength: needle.length, newText: edits[i]!.newText });
  }
  matched.sort((a, b) => a.matchIndex - b.matchIndex);
  for (let i = 1; i < matched.length; i++) {
    if (matched[i - 1]!.matchIndex + matched[i - 1]!.matchLength > matched[i]!.matchIndex) {
      return { error: `edits[${matched[i - 1]!.editIndex}] and edits[${matched[i]!.editIndex}] overlap in ${path}; merge them into one edit or target disjoint regions` };
    }
  }
  return anyFuzzy ? applyReplacementsPreservingUnchangedLines(original, base, matched) : applyReplacements(base, matched, 0);
}

export const editFileTool: ServerTool = {
  name: 'edit_file',
  displayName: 'Edit file',
  permissionWrite: true,
  supportStream: false,
  usesCwd: true,
  definition: () => functionDefinition('edit_file',
    'Edit a file using exact text replacement. Each edits[].old_text must be unique in the file ' +
    'and is matched against the original content, not incrementally. Merge nearby changes into ' +
    'one edit instead of overlapping edits. Use write_file to replace the whole file.', {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path to the file to edit' },
        edits: {
          type: 'array',
          description: 'One or more exact text replacements to apply',
          items: {
            type: 'object',
            properties: {
              old_text: { type: 'string', description: 'Exact text to find; must be unique in the file and must not overlap with other edits' },
              new_text: { type: 'string', description: 'Text to replace old_text with' },
            },
            required: ['old_text', 'new_text'],
          },
        },
      },
      required: ['path', 'edits'],
    }),

  async invoke({ params, io }: ToolCall) {
    const path = requiredString(params, 'path');
    const edits = readEdits(at(params, 'edits'));
    if (typeof edits === 'string') return toolError(edits);
    const files = io();
    const original = await files.readFile(path);
    if (original === null) return toolError(`failed to open file: ${path}`);
    const edited = applyEdits(original, edits, path);
    if (typeof edited !== 'string') return edited;
    if (edited === original) return toolError('no changes made: the replacement(s) produced identical content');
    if (!(await files.writeFile(path, edited))) return toolError(`failed to write file: ${path}`);
    return { result: 'file edited successfully', path, edits_applied: edits.length };
  },
};
