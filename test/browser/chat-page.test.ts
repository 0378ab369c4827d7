// The chat page of inference-server in headless Chromium, on the generated chat model with its
// vision projector: streaming answers, stop (the slot frees), conversations in localStorage,
// settings sent with the request, image attachments, audio attachments (on a second server with
// the audio projector), the API-key prompt, keyboard and 375 px.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ElementHandle, HTTPRequest, Page } from 'puppeteer-core';
import t from 'tap';
import { ensureAudioProjector } from '../fixtures/audio-projector.js';
import { ensureTestModels } from '../fixtures/models.js';
import { assertPageBuilt, collectProblems, elementsPastViewport, launchBrowser, overflowsHorizontally, screenshot, tabOrder, unlabelledControls } from '../helpers/browser.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { dataUrl, encodePng } from '../helpers/png.js';
import { REPO_ROOT } from '../helpers/reference.js';

assertPageBuilt('chat');
const models = await ensureTestModels();
const server = await startTestServer(models.chat, { webui: true, mmproj: models.mmproj, parallel: 2 });
t.teardown(server.close);
// The same model with the audio projector instead: /props says audio, not vision.
const listener = await startTestServer(models.chat, { webui: true, mmproj: await ensureAudioProjector(), parallel: 1 });
t.teardown(listener.close);
const browser = await launchBrowser();
t.teardown(() => browser.close());

/** A fresh page (empty localStorage: each test gets its own browser context) at the chat page, connected. */
async function openChat(base = server.base, width = 1200): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.createBrowserContext();
  t.teardown(() => context.close());
  const page = await context.newPage();
  const problems = collectProblems(page);
  await page.setViewport({ width, height: 800 });
  await page.goto(`${base}/`);
  return { page, problems };
}

async function waitConnected(page: Page): Promise<void> {
  await page.waitForFunction(() => document.getElementById('connection')?.textContent === 'Connected');
}

/** Fills the settings form fields (by id) the way a user types them. */
async function fillSettings(page: Page, values: Record<string, string>): Promise<void> {
  for (const [id, value] of Object.entries(values)) {
    await page.click(`#${id}`, { count: 3 });
    await page.keyboard.press('Backspace');
    await page.type(`#${id}`, value);
  }
}

/** Types a message and sends it with Enter; resolves when the answer has ended (stopped or not). */
async function sendAndWait(page: Page, text: string): Promise<void> {
  const before = await page.$$eval('#messages li.assistant', (items) => items.length);
  await page.type('#prompt', text);
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => {
    const answers = document.querySelectorAll('#messages li.assistant');
    return answers.length === n + 1 && !answers[n]!.hasAttribute('aria-busy');
  }, { timeout: 120_000 }, before);
}

function storedConversations(page: Page): Promise<Array<{ id: string; title: string; messages: Array<{ role: string; content: string; images?: string[]; audio?: Array<{ data: string; format: string; name?: string }>; stopped?: boolean }> }>> {
  return page.evaluate(() => JSON.parse(localStorage.getItem('inference-chat:conversations') ?? '[]'));
}

/** A mono 16-bit PCM WAV at 16 kHz: a 440 Hz tone. */
function toneWav(seconds: number): Buffer {
  const rate = 16000;
  const pcm = Int16Array.from({ length: Math.round(rate * seconds) }, (_, i) => Math.round(6000 * Math.sin((2 * Math.PI * 440 * i) / rate)));
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + pcm.byteLength, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16); // format chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // channels
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28); // bytes per second
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(pcm.byteLength, 40);
  return Buffer.concat([header, Buffer.from(pcm.buffer)]);
}

/** Writes the bytes to a new temporary file of that name and picks it in the page's file input. */
async function attachFile(page: Page, name: string, bytes: Buffer): Promise<void> {
  const file = join(mkdtempSync(join(tmpdir(), 'chat-page-')), name);
  writeFileSync(file, bytes);
  await ((await page.$('#attach')) as ElementHandle<HTMLInputElement>).uploadFile(file);
}

/** The types the file input offers to pick. */
function acceptedTypes(page: Page): Promise<string[]> {
  return page.$eval('#attach', (e) => (e as HTMLInputElement).accept.split(',').filter(Boolean));
}

/** Every request body the page posts to /v1/chat/completions, with its headers. */
function captureChatRequests(page: Page): Array<{ url: string; headers: Record<string, string>; body: any }> {
  const captured: Array<{ url: string; headers: Record<string, string>; body: any }> = [];
  page.on('request', (request: HTTPRequest) => {
    if (request.url().endsWith('/v1/chat/completions')) captured.push({ url: request.url(), headers: request.headers(), body: JSON.parse(request.postData() ?? 'null') });
  });
  return captured;
}

t.test('GET / serves the page from memory: CSP, ETag with 304, HEAD, assets under /webui/', async (t) => {
  const page = await fetch(`${server.base}/`);
  t.equal(page.status, 200);
  t.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  t.equal(page.headers.get('content-security-policy'), "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  t.equal(page.headers.get('cache-control'), 'no-cache');
  const html = await page.text();
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
  t.notMatch(html, /\son[a-z]+=/i, 'no inline event handler');
  t.notMatch(html, /https?:\/\//, 'nothing from another origin');
  const etag = page.headers.get('etag');
  t.match(etag, /^"[A-Za-z0-9_-]{22}"$/);
  const again = await fetch(`${server.base}/`, { headers: { 'if-none-match': etag! } });
  t.equal(again.status, 304);
  t.equal(await again.text(), '');
  const head = await fetch(`${server.base}/webui/main.js`, { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.headers.get('content-type'), 'text/javascript; charset=utf-8');
  t.ok(Number(head.headers.get('content-length')) > 0, 'HEAD gives the length of the script');
  t.equal(await head.text(), '');
  t.equal((await fetch(`${server.base}/webui/chat.css`)).headers.get('content-type'), 'text/css; charset=utf-8');
  t.equal((await fetch(`${server.base}/webui/nothing.js`)).status, 404);
});

t.test('inference-server serves the page by default and not with --no-webui', async (t) => {
  const statusOfRoot = (args: string[]): Promise<number> => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', './scripts/ts-loader.mjs', 'src/inference/server-main.ts', '-m', models.chat, '--port', '0', '-c', '512', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /model ready/.test(stderr) && /listening on (http:\/\/\S+)/.exec(stderr);
      if (!match) return;
      child.stderr.removeAllListeners('data');
      fetch(`${match[1]}/`).then((r) => resolve(r.status), reject).finally(() => child.kill());
    });
    child.on('exit', (code) => reject(new Error(`server exited (${code}): ${stderr}`)));
  });
  t.equal(await statusOfRoot([]), 200);
  t.equal(await statusOfRoot(['--no-webui']), 404);
});

t.test('a message sent with Enter streams its answer into the page, as the API answers it', async (t) => {
  const { page, problems } = await openChat();
  const requests = captureChatRequests(page);
  await waitConnected(page);
  await fillSettings(page, { 'system-prompt': 'You are terse.', temperature: '0', 'max-tokens': '200' });
  // Count the answer's distinct lengths while it is still being generated (aria-busy).
  await page.evaluate(() => {
    (window as any).streamedLengths = new Set<number>();
    new MutationObserver(() => {
      const answer = document.querySelector('#messages li.assistant[aria-busy] .body');
      if (answer && answer.textContent) (window as any).streamedLengths.add(answer.textContent.length);
    }).observe(document.getElementById('messages')!, { subtree: true, childList: true, characterData: true });
  });
  await sendAndWait(page, 'Write a haiku about GPUs.');
  const streamed = await page.evaluate(() => (window as any).streamedLengths.size as number);
  t.ok(streamed >= 2, `the answer grew on screen while it streamed (${streamed} lengths seen)`);
  t.equal(requests.length, 1);
  t.match(requests[0]!.body, { stream: true, temperature: 0, max_tokens: 200, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Write a haiku about GPUs.' }] });
  const [conversation] = await storedConversations(page);
  const answer = conversation!.messages[1]!;
  const direct = await postJson(`${server.base}/v1/chat/completions`, { ...requests[0]!.body, stream: false });
  t.equal(answer.content, direct.body.choices[0].message.content, 'the page shows the text the API gives for the same request');
  t.ok(answer.content.length > 0);
  t.match(await page.$eval('#status-last', (e) => e.textContent), /^\d+\.\d tokens\/s · \d+ tokens$/);
  t.match(await page.$eval('#status-model', (e) => e.textContent), /^tiny-chat\.gguf · context \d+$/);
  t.match(await page.$eval('#status-metrics', (e) => e.textContent), /^\d+\.\d tokens\/s · \d+ tokens generated$/);
  await screenshot(page, 'chat-answer-desktop');
  t.same(problems, []);
});

t.test('Markdown in answers becomes code blocks, emphasis and links; HTML in them stays text', async (t) => {
  const { page } = await openChat();
  const rendered = await page.evaluate(async () => {
    const { renderMarkdown } = await import('/webui/markdown.js' as string);
    const host = document.createElement('div');
    host.append(renderMarkdown('# Title\nSome **bold**, *italic* and `code` with [a link](https://example.com).\n\n```js\nconst a = "<b>x</b>";\n```\n- one\n- two\n<img src=x onerror="window.pwned=1">'));
    return {
      heading: host.querySelector('h3')?.textContent,
      strong: host.querySelector('strong')?.textContent,
      em: host.querySelector('em')?.textContent,
      inlineCode: host.querySelector('p code')?.textContent,
      link: [host.querySelector('a')?.getAttribute('href'), host.querySelector('a')?.getAttribute('rel')],
      codeLang: host.querySelector('figure.code figcaption span')?.textContent,
      code: host.querySelector('pre code')?.textContent,
      items: [...host.querySelectorAll('ul li')].map((li) => li.textContent),
      images: host.querySelectorAll('img').length,
      tail: host.lastElementChild?.textContent,
    };
  });
  t.same(rendered, {
    heading: 'Title', strong: 'bold', em: 'italic', inlineCode: 'code', link: ['https://example.com', 'noopener noreferrer'],
    codeLang: 'js', code: 'const a = "<b>x</b>";', items: ['one', 'two'], images: 0, tail: '<img src=x onerror="window.pwned=1">',
  });
});

t.test('Stop ends a long answer and the status panel shows its slot free again', async (t) => {
  const { page, problems } = await openChat();
  await waitConnected(page);
  await fillSettings(page, { 'max-tokens': '-1' });
  await page.type('#prompt', 'Tell me everything.');
  await page.click('#send');
  await page.waitForFunction(() => document.getElementById('status-slots')?.dataset.busy === '1', { timeout: 30_000 });
  await page.waitForFunction(() => (document.querySelector('#messages li.assistant[aria-busy] .body')?.textContent ?? '').length > 0);
  await screenshot(page, 'chat-streaming');
  t.equal(await page.$eval('#stop', (b) => (b as HTMLButtonElement).disabled), false, 'Stop is enabled while generating');
  await page.click('#stop');
  await page.waitForFunction(() => !document.querySelector('#messages li.assistant[aria-busy]'));
  await page.waitForFunction(() => document.getElementById('status-slots')?.dataset.busy === '0', { timeout: 30_000 });
  t.equal(await page.$eval('#status-slots', (e) => e.textContent), '0 busy · 2 idle');
  const slots = await (await fetch(`${server.base}/slots`)).json() as Array<{ is_processing: boolean }>;
  t.same(slots.map((s) => s.is_processing), [false, false], 'the server freed the slot');
  const [conversation] = await storedConversations(page);
  t.equal(conversation!.messages[1]!.stopped, true);
  t.match(await page.$eval('#messages li.assistant .note', (e) => e.textContent), /stopped/);
  t.equal(await page.$eval('#stop', (b) => (b as HTMLButtonElement).disabled), true);
  await screenshot(page, 'chat-stopped');
  t.same(problems, []);
});

t.test('conversations stay in localStorage: reload restores them, New chat starts another, delete removes one', async (t) => {
  const { page } = await openChat();
  await waitConnected(page);
  await fillSettings(page, { 'max-tokens': '8' });
  await sendAndWait(page, 'First conversation');
  await page.click('#new-chat');
  t.equal(await page.$$eval('#messages li', (items) => items.length), 0, 'New chat shows an empty conversation');
  await sendAndWait(page, 'Second conversation');
  await page.reload();
  await waitConnected(page);
  t.same(await page.$$eval('#conversation-list .conversation', (b) => b.map((e) => e.textContent)), ['Second conversation', 'First conversation']);
  t.equal(await page.$eval('#messages li.user .body', (e) => e.textContent), 'Second conversation', 'the open conversation is restored');
  t.equal(await page.$eval('#max-tokens', (e) => (e as HTMLInputElement).value), '8', 'settings are restored');
  await page.click('#conversation-list li:nth-child(2) .conversation');
  t.equal(await page.$eval('#messages li.user .body', (e) => e.textContent), 'First conversation');
  await page.click('#conversation-list li:nth-child(1) .delete');
  t.same(await page.$$eval('#conversation-list .conversation', (b) => b.map((e) => e.textContent)), ['First conversation']);
  t.same((await storedConversations(page)).map((c) => c.title), ['First conversation']);
  await page.click('#conversation-list li:nth-child(1) .delete');
  t.same(await storedConversations(page), []);
  t.equal(await page.$$eval('#messages li', (items) => items.length), 0);
});

t.test('with a projector, an attached image is shown and sent as an image_url part', async (t) => {
  const { page, problems } = await openChat();
  const requests = captureChatRequests(page);
  await waitConnected(page);
  t.equal(await page.$eval('#attach-label', (e) => (e as HTMLElement).hidden), false, 'Attach image is offered (/props says vision)');
  t.equal(await page.$eval('#attach-label', (e) => e.textContent?.trim()), 'Attach image');
  t.same(await acceptedTypes(page), ['image/png', 'image/jpeg', 'image/gif', 'image/bmp'], 'no audio projector: images only, no audio type offered');
  await fillSettings(page, { 'max-tokens': '8' });
  const png = encodePng(64, 64, (x, y) => [x * 4, y * 4, 128]);
  await attachFile(page, 'picture.png', png);
  await page.waitForSelector('#attachments img');
  await sendAndWait(page, 'What is in the picture?');
  t.same(requests[0]!.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'What is in the picture?' }, { type: 'image_url', image_url: { url: dataUrl(png) } }] }]);
  t.equal(await page.$$eval('#messages li.user .images img', (imgs) => imgs.length), 1, 'the image shows in the conversation');
  t.equal(await page.$$eval('#attachments li', (items) => items.length), 0, 'the attachment tray is emptied');
  t.notOk(await page.$eval('#messages li.assistant', (e) => e.querySelector('.note.error')), 'the server answered');
  t.same(problems, []);
});

t.test('with an audio projector, an attached WAV is named in the tray, sent as an input_audio part and played back in the message', async (t) => {
  const { page, problems } = await openChat(listener.base);
  const requests = captureChatRequests(page);
  await waitConnected(page);
  t.equal(await page.$eval('#attach-label', (e) => (e as HTMLElement).hidden), false, 'Attach audio is offered (/props says audio)');
  t.equal(await page.$eval('#attach-label', (e) => e.textContent?.trim()), 'Attach audio');
  const accepted = await acceptedTypes(page);
  t.ok(accepted.includes('audio/wav') && accepted.includes('audio/mpeg'), `WAV and MP3 are offered (${accepted.join(',')})`);
  t.notOk(accepted.some((type) => type.startsWith('image/')), 'no vision: no image type offered');
  await fillSettings(page, { 'max-tokens': '8' });
  // An image (no vision here) is refused by name.
  await attachFile(page, 'picture.png', encodePng(8, 8, () => [0, 0, 0]));
  await page.waitForFunction(() => document.getElementById('attach-error')?.textContent === 'The model cannot take picture.png.');
  t.equal(await page.$$eval('#attachments li', (items) => items.length), 0, 'the image is not attached');
  const wav = toneWav(0.5);
  // Picked, removed, picked again: the tray names the file and its button takes it away.
  await attachFile(page, 'tone.wav', wav);
  await page.waitForSelector('#attachments li.audio');
  t.equal(await page.$eval('#attachments li.audio .name', (e) => e.textContent), 'tone.wav');
  t.equal(await page.$eval('#attach-error', (e) => e.textContent), '', 'a clip it takes clears the refusal');
  await page.click('#attachments li.audio button[aria-label="Remove audio tone.wav"]');
  await page.waitForFunction(() => document.querySelectorAll('#attachments li').length === 0);
  await attachFile(page, 'tone.wav', wav);
  await page.waitForSelector('#attachments li.audio');
  await screenshot(page, 'chat-audio-attached');
  await sendAndWait(page, 'What is said?');
  t.equal(requests.length, 1);
  t.same(requests[0]!.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'What is said?' }, { type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } }] }],
    'the clip travels as raw base64 of the file, format wav');
  t.notOk(await page.$eval('#messages li.assistant', (e) => e.querySelector('.note.error')), 'the server answered');
  t.match(await page.$eval('#messages li.assistant .note', (e) => e.textContent), /^\d+ tokens · /, 'the answer ended with its timings');
  t.equal(await page.$$eval('#attachments li', (items) => items.length), 0, 'the attachment tray is emptied');
  t.same(await page.$$eval('#messages li.user audio', (players) => players.map((e) => (e as HTMLAudioElement).src)), [`data:audio/wav;base64,${wav.toString('base64')}`], 'the message shows a player of the clip');
  const [conversation] = await storedConversations(page);
  t.same(conversation!.messages[0]!.audio, [{ data: `data:audio/wav;base64,${wav.toString('base64')}`, format: 'wav', name: 'tone.wav' }], 'the clip is kept with its message');
  // After a reload the message still plays its clip: the player loads it (0.5 s long).
  await page.reload();
  await waitConnected(page);
  t.equal(await page.$eval('#messages li.user figcaption', (e) => e.textContent), 'tone.wav');
  // Loaded, or refused (a CSP without media-src data: refuses it).
  await page.waitForFunction(() => {
    const player = document.querySelector('#messages li.user audio') as HTMLAudioElement | null;
    return player !== null && (player.readyState >= 1 || player.error !== null);
  });
  const player = await page.$eval('#messages li.user audio', (e) => ({ controls: (e as HTMLAudioElement).controls, duration: (e as HTMLAudioElement).duration, error: (e as HTMLAudioElement).error?.code ?? null }));
  t.equal(player.controls, true);
  t.equal(player.error, null, 'the player may load the clip (the CSP allows media-src data:)');
  t.ok(Math.abs(player.duration - 0.5) < 0.01, `the player has the clip (${player.duration} s)`);
  await screenshot(page, 'chat-audio-message');
  // An MP3 in the same conversation: format mp3, after the WAV that the history still carries.
  const mp3 = readFileSync(join(REPO_ROOT, 'vendor', 'llama.cpp', 'tools', 'mtmd', 'test-2.mp3'));
  await attachFile(page, 'speech.mp3', mp3);
  await page.waitForSelector('#attachments li.audio');
  await sendAndWait(page, 'And this one?');
  const sent = requests.at(-1)!.body.messages as Array<{ role: string; content: unknown }>;
  t.same(sent[0]!.content, requests[0]!.body.messages[0].content, 'the first message keeps its WAV');
  t.same(sent.at(-1), { role: 'user', content: [{ type: 'text', text: 'And this one?' }, { type: 'input_audio', input_audio: { data: mp3.toString('base64'), format: 'mp3' } }] }, 'the MP3 is sent as format mp3');
  t.notOk(await page.$eval('#messages li.assistant:last-child', (e) => e.querySelector('.note.error')), 'the server answered the MP3');
  t.same((await storedConversations(page))[0]!.messages[2]!.audio?.map((clip) => [clip.format, clip.name, clip.data.split(',')[0]]), [['mp3', 'speech.mp3', 'data:audio/mpeg;base64']], 'the MP3 is kept as audio/mpeg');
  t.same(problems, []);
});

t.test('a clip that overflows localStorage is sent and shown, and the conversation is kept without it', async (t) => {
  const { page } = await openChat(listener.base);
  await waitConnected(page);
  await fillSettings(page, { 'max-tokens': '4' });
  // Fill the origin's storage, leaving about 8 K characters: room for a conversation, not for the clip's 21 K.
  await page.evaluate(() => {
    localStorage.setItem('room', 'x'.repeat(8192));
    let size = 1 << 20;
    for (let i = 0; size >= 1024; i++) {
      try {
        localStorage.setItem(`filler-${i}`, 'x'.repeat(size));
      } catch {
        size /= 2;
      }
    }
    localStorage.removeItem('room');
  });
  const wav = toneWav(0.5);
  await attachFile(page, 'tone.wav', wav);
  await page.waitForSelector('#attachments li.audio');
  await sendAndWait(page, 'Too long to keep?');
  t.equal(await page.$eval('#connection', (e) => e.textContent), 'Connected (attachments too large to keep in this browser)');
  t.notOk(await page.$eval('#messages li.assistant', (e) => e.querySelector('.note.error')), 'the server answered');
  t.equal(await page.$$eval('#messages li.user audio', (players) => players.length), 1, 'this tab still shows the clip');
  const [conversation] = await storedConversations(page);
  t.equal(conversation!.title, 'Too long to keep?');
  t.same(conversation!.messages.map((m) => [m.role, 'audio' in m]), [['user', false], ['assistant', false]], 'saved without the clip');
});

t.test('keyboard: Tab reaches every control in page order, and every control has a label', async (t) => {
  const { page } = await openChat();
  await waitConnected(page);
  await fillSettings(page, { 'max-tokens': '4' });
  await sendAndWait(page, 'Hello');
  const expected = await page.evaluate(() => [...document.querySelectorAll<HTMLElement>('a[href], button, input, textarea, select, [tabindex]')]
    .filter((e) => !(e as HTMLButtonElement).disabled && e.tabIndex >= 0 && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden')
    .map((e) => e.id ? `#${e.id}` : `${e.tagName.toLowerCase()}[${e.getAttribute('aria-label') ?? e.textContent?.trim() ?? ''}]`));
  const order = await tabOrder(page, expected[0]!);
  t.same(order, expected);
  for (const id of ['#new-chat', '#system-prompt', '#temperature', '#top-k', '#top-p', '#min-p', '#repeat-penalty', '#max-tokens', '#seed', '#reset-settings', '#prompt', '#attach', '#send']) {
    t.ok(order.includes(id), `Tab reaches ${id}`);
  }
  t.ok(order.some((e) => e.startsWith('button[Delete conversation')), 'Tab reaches the delete button');
  t.same(await unlabelledControls(page), []);
});

t.test('at 375 px wide nothing overflows sideways; the menu opens the side panel', async (t) => {
  const { page, problems } = await openChat(server.base, 375);
  await waitConnected(page);
  await page.evaluate(() => {
    localStorage.setItem('inference-chat:conversations', JSON.stringify([{ id: 'c1', title: 'Long lines', updated: 1, messages: [
      { role: 'user', content: 'Show a long line of code' },
      { role: 'assistant', content: `Here:\n\n\`\`\`python\nprint("${'x'.repeat(300)}")\n\`\`\`\n${'averyveryverylongwordwithoutspaces'.repeat(6)}` },
    ] }]));
    localStorage.setItem('inference-chat:current', 'c1');
  });
  await page.reload();
  await waitConnected(page);
  t.same(await elementsPastViewport(page), [], 'no element sticks out');
  t.equal(await overflowsHorizontally(page), false, 'chat view fits 375 px');
  t.equal(await page.$eval('#sidebar', (e) => getComputedStyle(e).display), 'none', 'the side panel is folded away');
  await screenshot(page, 'chat-375');
  await page.click('#menu-toggle');
  t.equal(await page.$eval('#menu-toggle', (e) => e.getAttribute('aria-expanded')), 'true');
  t.same(await elementsPastViewport(page), [], 'nothing in the side panel sticks out');
  t.equal(await overflowsHorizontally(page), false, 'side panel fits 375 px');
  await screenshot(page, 'chat-375-menu');
  t.same(problems, []);
});

t.test('a server with --api-key asks for the key and sends it only in the Authorization header', async (t) => {
  const KEY = 'sk-test-web-0123456789';
  const locked = await startTestServer(models.chat, { webui: true, apiKeys: [KEY], parallel: 1 });
  t.teardown(locked.close);
  const { page, problems } = await openChat(locked.base);
  const urls: string[] = [];
  page.on('request', (request) => { urls.push(request.url()); });
  const requests = captureChatRequests(page);
  await page.waitForSelector('#key-dialog[open]');
  t.equal(await page.$eval('#connection', (e) => e.textContent), 'API key required');
  await screenshot(page, 'chat-api-key');
  await page.type('#api-key', 'wrong-key');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('key-error')?.textContent === 'The server refused this key.');
  await page.click('#api-key', { count: 3 });
  await page.type('#api-key', KEY);
  await page.keyboard.press('Enter');
  await waitConnected(page);
  t.equal(await page.$eval('#key-dialog', (e) => (e as HTMLDialogElement).open), false);
  t.equal(await page.$eval('#attach-label', (e) => (e as HTMLElement).hidden), true, 'no projector: no Attach image');
  t.same(await acceptedTypes(page), [], 'no projector: neither images nor audio offered');
  await fillSettings(page, { 'max-tokens': '4' });
  await sendAndWait(page, 'Hi');
  t.equal(requests[0]!.headers['authorization'], `Bearer ${KEY}`);
  t.notOk(await page.$eval('#messages li.assistant', (e) => e.querySelector('.note.error')), 'the answer came');
  t.notOk(urls.some((u) => u.includes(KEY) || u.includes(encodeURIComponent(KEY))), 'the key is in no URL');
  t.same(problems.filter((p) => !/status of 401/.test(p)), [], 'only the expected 401s');
});
