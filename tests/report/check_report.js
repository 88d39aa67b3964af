// check_report.js HTML PNG: opens a `gopt report` page in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core from .deps/node) and checks: no console error or
// page error, no network request besides the page itself (the file is self-contained), every
// section present and drawn (model table, methods table with a best row, two timelines with
// kernels, a memory chart per device with its capacity line, the Graphviz graph, the convergence
// plot, the fidelity table), and that the timeline zooms: the + button halves the window, the
// wheel over a timeline narrows it around the pointer, a drag pans it, reset restores it, and a
// kernel drawn wider after zooming in. Writes a full-page screenshot to PNG.
const path = require('path');
const root = path.resolve(__dirname, '../..');
const { chromium } = require(path.join(root, '.deps/node/node_modules/playwright-core'));

const [html, png] = process.argv.slice(2);
let failures = 0;
function check(cond, msg) { if (!cond) { failures++; console.log('FAIL: ' + msg); } }

(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  const errors = [], requests = [];
  page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', e => errors.push(String(e)));
  const url = 'file://' + path.resolve(html);
  page.on('request', r => { if (r.url() !== url) requests.push(r.url()); });
  await page.goto(url, { waitUntil: 'load' });
  for (const id of ['summary', 'methods', 'timeline', 'memory', 'graph', 'convergence', 'fidelity'])
    check(await page.locator('section#' + id + ' h2').count() === 1, 'section ' + id + ' present');
  const count = async sel => page.locator(sel).count();
  check(await count('#summary table tr') >= 5, 'model summary rows');
  check(await count('#methods tr.best') === 1, 'one best row in the methods table');
  check(await count('#tl-best rect.k') > 10 && await count('#tl-default rect.k') > 10, 'timelines have kernels');
  check(await count('#memory svg.mem') >= 2 && await count('#memory line.capacity') >= 2, 'memory chart per device with capacity');
  check(await count('#memory polyline.mem-best') >= 1, 'memory curve drawn');
  check(await count('#graph .gv svg g.node') >= 10, 'graph laid out by Graphviz');
  check(await count('#convergence svg polyline') >= 1, 'convergence curve');
  check(await count('#fidelity table tr') >= 3, 'fidelity table (with --costdb)');

  const win = async () => page.evaluate(() => { const s = document.getElementById('tl-best');
    return [+s.dataset.t0, +s.dataset.t1]; });
  const width = async () => page.evaluate(() => {
    const r = [...document.querySelectorAll('#tl-best rect.k')].filter(x => x.getAttribute('visibility') !== 'hidden');
    return Math.max(...r.map(x => +x.getAttribute('width'))); });
  const [a0, a1] = await win(), w0 = await width();
  check(a0 === 0 && a1 > 0, 'initial window starts at 0: ' + [a0, a1]);
  await page.click('#zoom-in');
  const [b0, b1] = await win();
  check(Math.abs((b1 - b0) - (a1 - a0) / 2) < 1e-9 * a1, 'zoom in halves the window: ' + [b0, b1]);
  check(await width() > w0 * 1.5, 'kernels drawn wider after zooming in');
  await page.locator('#tl-best').scrollIntoViewIfNeeded();
  const box = await page.locator('#tl-best').boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.wheel(0, -400);
  await page.waitForTimeout(100);
  const [c0, c1] = await win();
  check(c1 - c0 < (b1 - b0) * 0.95, 'wheel zooms in: ' + [c0, c1]);
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.7, box.y + box.height / 2, { steps: 4 });
  await page.mouse.up();
  const [d0, d1] = await win();
  check(Math.abs((d1 - d0) - (c1 - c0)) < 1e-9 * a1 && d0 !== c0, 'drag pans: ' + [c0, c1, '->', d0, d1]);
  await page.click('#zoom-reset');
  const [e0, e1] = await win();
  check(e0 === a0 && e1 === a1, 'reset restores the window');
  check(requests.length === 0, 'no network request: ' + requests.join(' '));
  check(errors.length === 0, 'console errors: ' + errors.join(' | '));
  await page.screenshot({ path: png, fullPage: true });
  await browser.close();
  console.log('failures: ' + failures);
  process.exit(failures ? 1 : 0);
})().catch(e => { console.log('FAIL: ' + e); process.exit(1); });
