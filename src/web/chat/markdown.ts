// A small Markdown renderer for model answers, building DOM nodes (never HTML strings), so no
// text of an answer can become markup or script. It renders what models write: fenced code
// blocks (an unclosed fence, as while streaming, runs to the end), headings, bullet and numbered
// lists, block quotes, paragraphs, and inline code, bold, italics and http(s) links.

type Block =
  | { kind: 'code'; lang: string; text: string }
  | { kind: 'heading'; level: number; text: string }
  | { kind: 'list'; ordered: boolean; items: string[] }
  | { kind: 'quote'; text: string }
  | { kind: 'paragraph'; text: string };

const FENCE = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d+[.)]\s+(.*)$/;

/** Renders `source` as DOM nodes; each code block gets a Copy button. */
export function renderMarkdown(source: string): DocumentFragment {
  const fragment = document.createDocumentFragment();
  for (const block of parseBlocks(source)) fragment.append(renderBlock(block));
  return fragment;
}

function parseBlocks(source: string): Block[] {
  const lines = source.split('\n');
  const blocks: Block[] = [];
  let paragraph: string[] = [];
  const flush = (): void => {
    if (paragraph.length > 0) blocks.push({ kind: 'paragraph', text: paragraph.join('\n') });
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const body: string[] = [];
      while (++i < lines.length && !lines[i]!.trim().startsWith(fence[1]!)) body.push(lines[i]!);
      blocks.push({ kind: 'code', lang: fence[2] ?? '', text: body.join('\n') });
      continue;
    }
    const heading = HEADING.exec(line);
    const listItem = BULLET.exec(line) ?? NUMBERED.exec(line);
    if (heading) {
      flush();
      blocks.push({ kind: 'heading', level: heading[1]!.length, text: heading[2]! });
    } else if (listItem) {
      flush();
      const ordered = NUMBERED.test(line);
      const last = blocks[blocks.length - 1];
      if (last?.kind === 'list' && last.ordered === ordered) last.items.push(listItem[1]!);
      else blocks.push({ kind: 'list', ordered, items: [listItem[1]!] });
    } else if (line.startsWith('>')) {
      flush();
      const last = blocks[blocks.length - 1];
      const text = line.replace(/^>\s?/, '');
      if (last?.kind === 'quote') last.text += `\n${text}`;
      else blocks.push({ kind: 'quote', text });
    } else if (line.trim() === '') {
      flush();
    } else {
      paragraph.push(line);
    }
  }
  flush();
  return blocks;
}

function renderBlock(block: Block): Node {
  switch (block.kind) {
    case 'code':
      return codeBlock(block.lang, block.text);
    case 'heading': {
      const h = document.createElement(`h${Math.min(block.level + 2, 6)}`);
      h.append(renderInline(block.text));
      return h;
    }
    case 'list': {
      const list = document.createElement(block.ordered ? 'ol' : 'ul');
      for (const item of block.items) {
        const li = document.createElement('li');
        li.append(renderInline(item));
        list.append(li);
      }
      return list;
    }
    case 'quote': {
      const quote = document.createElement('blockquote');
      quote.append(renderInline(block.text));
      return quote;
    }
    case 'paragraph': {
      const p = document.createElement('p');
      p.append(renderInline(block.text));
      return p;
    }
  }
}

function codeBlock(lang: string, text: string): HTMLElement {
  const figure = document.createElement('figure');
  figure.className = 'code';
  const caption = document.createElement('figcaption');
  const label = document.createElement('span');
  label.textContent = lang || 'code';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.textContent = 'Copy';
  copy.setAttribute('aria-label', `Copy ${lang || 'code'} block`);
  copy.addEventListener('click', () => {
    void navigator.clipboard?.writeText(text).then(() => { copy.textContent = 'Copied'; }, () => { copy.textContent = 'Copy failed'; });
  });
  caption.append(label, copy);
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  if (lang) code.className = `language-${lang}`;
  code.textContent = text;
  pre.append(code);
  figure.append(caption, pre);
  return figure;
}

// Inline spans, first match wins: `code`, **bold**, *italic* or _italic_, [text](http(s) URL).
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|\*(?=\S)([^*]*?\S)\*|\b_(?=\S)([^_]*?\S)_\b|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g;

function renderInline(text: string): DocumentFragment {
  const fragment = document.createDocumentFragment();
  let at = 0;
  for (const match of text.matchAll(INLINE)) {
    const index = match.index ?? 0;
    if (index > at) fragment.append(withBreaks(text.slice(at, index)));
    fragment.append(inlineNode(match));
    at = index + match[0].length;
  }
  if (at < text.length) fragment.append(withBreaks(text.slice(at)));
  return fragment;
}

function inlineNode(match: RegExpMatchArray): Node {
  if (match[2] !== undefined) {
    const code = document.createElement('code');
    code.textContent = match[2];
    return code;
  }
  if (match[3] !== undefined) {
    const strong = document.createElement('strong');
    strong.append(renderInline(match[3]));
    return strong;
  }
  const emphasised = match[4] ?? match[5];
  if (emphasised !== undefined) {
    const em = document.createElement('em');
    em.append(renderInline(emphasised));
    return em;
  }
  const link = document.createElement('a');
  link.href = match[7]!;
  link.rel = 'noopener noreferrer';
  link.target = '_blank';
  link.textContent = match[6]!;
  return link;
}

/** Text with its single newlines kept as line breaks. */
function withBreaks(text: string): DocumentFragment {
  const fragment = document.createDocumentFragment();
  text.split('\n').forEach((line, i) => {
    if (i > 0) fragment.append(document.createElement('br'));
    fragment.append(line);
  });
  return fragment;
}
