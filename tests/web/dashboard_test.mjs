// The dashboard in a real browser: starts anisoscope-server on the bert_run fixture,
// stores steps 0, 100 and 250 with the real CLI (and a second run with steps 0 and 250,
// for the runs-side-by-side view), loads the page in Debian's chromium (playwright-core)
// and checks every view from the page's read-only state (window.__anisoscope) against the
// HTTP API (series, vectors, token clouds, correlations, isotropic baselines), a tooltip,
// the CSV download, the controls of the new views and the alarm markers (the server's one
// rule always fires: one alarm per layer at the first step); then stores step 400 and checks
// that polling picks it up without a reload. Last, on a second server, a run with Pythia's 154
// step names: the log step axis, its labels, the cosine range, the per-chart choices and the
// alarm markers (step_axis_checks.mjs). Screenshots of every view go to
// $ANISOSCOPE_SCREENSHOTS. The server runs with tokens (--auth tokens): the CLI uses a
// writer's, and the page asks for a reader's once (a prompt) and keeps it across polls.
// Exit 0 pass, 1 fail, 77 skip (no chromium/playwright-core).
//   ANISOSCOPE_FIXTURES=build/fixtures ANISOSCOPE_BIN=build/bin node tests/web/dashboard_test.mjs

import { execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { checkPythiaSteps } from './step_axis_checks.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
const FIXTURES = process.env.ANISOSCOPE_FIXTURES;
const BIN = process.env.ANISOSCOPE_BIN;
const SHOTS = process.env.ANISOSCOPE_SCREENSHOTS || path.join(os.tmpdir(), 'anisoscope-screenshots');
const VIEWS = ['cosine', 'qk-concat', 'dot', 'entropy', 'entropy-heads', 'attention', 'hidden', 'correlation',
  'spectrum', 'spectrum-stats', 'heatmap', 'trajectory', 'token-cloud', 'runs'];
const RUN = 'browser-test';
const RUN_B = 'browser-test-b';  // another "seed": steps 0 and 250 with other weights
const started = Date.now();

function log(message) {
  console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${message}`);
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

function skip(message) {
  console.log(`SKIPPED: ${message}`);
  process.exit(77);
}

if (!FIXTURES || !BIN) {
  console.error('set ANISOSCOPE_FIXTURES and ANISOSCOPE_BIN (ctest does)');
  process.exit(1);
}
if (!fs.existsSync(CHROMIUM)) skip(`${CHROMIUM} not found: apt-get install chromium (scripts/setup.sh does)`);
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  skip(`playwright-core is not installed: run npm ci in ${HERE} (scripts/setup.sh does)`);
}

const fixture = path.join(FIXTURES, 'bert_run');
const checkpoint = (step) => path.join(fixture, 'safetensors', `step_${step}`);
const config = JSON.parse(fs.readFileSync(path.join(checkpoint(0), 'config.json'), 'utf8'));
const LAYERS = config.num_hidden_layers;
const HEADS = config.num_attention_heads;
const webDir = path.join(BIN, '..', 'web');
check(fs.existsSync(path.join(webDir, 'index.html')),
  `${webDir}/index.html is missing: run scripts/setup.sh (npm ci in web/), then rebuild`);

const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'anisoscope-browser-'));
const DB = path.join(temp, 'test.db');
const servers = [];  // every server started, stopped at the end
let browser = null;

// A new token of `role`, made on the "host" as an admin would.
function makeToken(name, role) {
  return execFileSync(path.join(BIN, 'anisoscope-server'),
    ['tokens', 'create', '--db', DB, '--name', name, '--role', role], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString().trim();
}
// docs/alarms.md's rule that fires on any run: each layer at its first stored step.
const RULES = path.join(temp, 'always.toml');
fs.writeFileSync(RULES, '[[rule]]\nname = "always"\nmetric = "attn_entropy"\nover = "heads"\n' +
  'aggregate = "min"\nbelow = 1000.0\n');
const WRITER = makeToken('browser-test-cli', 'writer');
const READER = makeToken('browser-test-page', 'reader');

// Starts a server (by default the test's: its database, tokens and rule); resolves {grpc,
// url} from its "listening on" / "dashboard at" lines.
function startServer({ db = DB, roots = [fixture], auth = 'tokens', rules = RULES } = {}) {
  const server = spawn(path.join(BIN, 'anisoscope-server'), [
    '--db', db, ...roots.flatMap((r) => ['--allow-root', r]), '--listen', '127.0.0.1:0', '--auth', auth,
    '--http-listen', '127.0.0.1:0', '--workers', '1', '--threads', '2', '--log-level', 'warn',
    '--alarm-rules', rules,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  servers.push(server);
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in 30 s:\n${output}`)), 30000);
    const seen = {};
    const onData = (chunk) => {
      output += chunk;
      const grpc = output.match(/listening on (\S+)/);
      const url = output.match(/dashboard at (http:\/\/\S+)/);
      if (grpc && url && !seen.done) {
        seen.done = true;
        clearTimeout(timer);
        resolve({ grpc: grpc[1], url: url[1] });
      }
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', (chunk) => { output += chunk; });
    server.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before serving:\n${output}`));
    });
  });
}

function cli(grpc, args) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ANISOSCOPE_TOKEN: WRITER };
    execFile(path.join(BIN, 'anisoscope'), ['--server', grpc, ...args], { env }, (error, stdout, stderr) => {
      if (error) reject(new Error(`anisoscope ${args.join(' ')} failed (${error.code}):\n${stderr}`));
      else resolve(stdout);
    });
  });
}

// Stores `steps`; `from` maps a step to the checkpoint step whose weights it gets.
function submit(grpc, steps, { run = RUN, from = (s) => s, force = false } = {}) {
  return cli(grpc, ['submit', '--run', run,
    ...steps.flatMap((s) => ['--checkpoint', `${s}=${checkpoint(from(s))}`]),
    '--probe-tokens', path.join(fixture, 'probe.jsonl'), ...(force ? ['--force'] : []), '--wait']);
}

// GET api/v1/PATH?PARAMS as the page's reader.
async function apiGet(url, pathname, params) {
  const target = new URL(`api/v1/${pathname}?${new URLSearchParams(params)}`, url);
  const response = await fetch(target, { headers: { Authorization: `Bearer ${READER}` } });
  check(response.ok, `GET ${target.pathname}${target.search}: HTTP ${response.status} ${await response.clone().text()}`);
  return response.json();
}

async function apiSeries(url, metric, run = RUN) {
  return (await apiGet(url, 'series', { run, metric })).points;
}

const summary = (page) => page.evaluate(() => window.__anisoscope.summary());

// Waits until every view shows `steps` steps; returns the page's summary.
async function waitForSteps(page, steps) {
  try {
    await page.waitForFunction(({ layers, heads, steps }) => {
      if (!window.__anisoscope) return false;  // undefined until the page's script has run
      const s = window.__anisoscope.summary();
      const full = (list, n) => list.length === n && list.every((x) => x.points === steps);
      return window.__anisoscope.ready && s.cosine.panels === layers &&
        full(s.cosine.series, layers * heads) && full(s.dot.series, layers * heads) &&
        full(s.entropyHeads.series, layers * heads) &&
        full(s.entropy.series, layers) && full(s.hidden.series, 2 * (layers + 1)) &&
        s.heatmap.steps === steps && s.trajectory.points === steps &&
        full(s.concat.series, layers) && full(s.attention.series, 4 * layers) &&
        full(s.spectrumStats.series, 4 * (layers + 1)) && full(s.correlation.series, 4) &&
        s.spectrum.steps === steps && s.spectrum.curves.length === layers + 1 &&
        s.tokenCloud.steps === steps && s.runs.series.some((x) => x.points === steps);
    }, { layers: LAYERS, heads: HEADS, steps }, { timeout: 20000, polling: 100 });
  } catch (error) {
    // A timeout, or an error in the page (which ends the wait early): say which.
    throw new Error(`the page did not show ${steps} steps in every view within 20 s ` +
      `(${error.message.split('\n')[0]}); it shows:\n` + JSON.stringify(await summary(page)));
  }
  return summary(page);
}

function checkSummary(s, steps, lastStep) {
  check(s.cosine.panels === LAYERS, `cosine grid: ${s.cosine.panels} panels, want one per layer (${LAYERS})`);
  const pairs = new Set(s.cosine.series.map((x) => `${x.layer}:${x.head}`));
  check(pairs.size === LAYERS * HEADS, `cosine grid: ${pairs.size} distinct (layer, head) series, want ${LAYERS * HEADS}`);
  for (const x of s.cosine.series) {
    check(x.points === steps, `cosine layer ${x.layer} head ${x.head}: ${x.points} points, want ${steps}`);
  }
  check(s.dot.panels === LAYERS, `scalar product grid: ${s.dot.panels} panels, want ${LAYERS}`);
  check(s.heatmap.cells === LAYERS * HEADS, `heatmap: ${s.heatmap.cells} cells, want ${LAYERS * HEADS}`);
  check(s.heatmap.step === lastStep, `heatmap shows step ${s.heatmap.step}, want the latest (${lastStep})`);
  check(s.trajectory.basis && /server/i.test(s.trajectory.basis), `trajectory basis text: ${s.trajectory.basis}`);
  check(s.trajectory.explainedVariance > 0 && s.trajectory.explainedVariance <= 1 + 1e-9,
    `trajectory explained variance ${s.trajectory.explainedVariance} outside (0, 1]`);
}

async function screenshots(page, suffix) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `dashboard${suffix}.png`), fullPage: true });
  // The README's picture (docs/images/dashboard.png): the first screen, as a user sees it.
  // ANISOSCOPE_README_SCREENSHOT=docs/images/dashboard.png writes it there.
  if (suffix === '') {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(SHOTS, 'readme.png') });
    if (process.env.ANISOSCOPE_README_SCREENSHOT) {
      fs.copyFileSync(path.join(SHOTS, 'readme.png'), process.env.ANISOSCOPE_README_SCREENSHOT);
    }
  }
  for (const view of VIEWS) {
    await page.locator(`[data-testid="view-${view}"]`).screenshot({ path: path.join(SHOTS, `${view}${suffix}.png`) });
  }
}

async function checkTooltip(page, url) {
  const expected = (await apiSeries(url, 'qk_mean_cosine')).find((p) => p.layer === 0 && p.head === 0 && p.step === '100');
  check(expected, 'the API has no qk_mean_cosine point for layer 0, head 0, step 100');
  await page.locator('[data-testid="view-cosine"]').scrollIntoViewIfNeeded();
  const at = await page.evaluate(() => window.__anisoscope.pointOnViewport('cosine', 0, 0, 1));
  await page.mouse.move(at.x, at.y);
  const tip = page.locator('[data-testid="view-cosine"] .tip');
  try {
    await tip.filter({ hasText: 'step 100' }).first().waitFor({ state: 'visible', timeout: 5000 });
  } catch {
    throw new Error(`no tooltip for step 100 after hovering layer 0, head 0 at (${at.x}, ${at.y})`);
  }
  const text = await tip.first().innerText();
  check(text.includes('layer 0'), `tooltip does not name layer 0: ${text}`);
  check(text.includes(String(expected.value)), `tooltip lacks the exact value ${expected.value}: ${text}`);
  await page.screenshot({ path: path.join(SHOTS, 'tooltip.png') });
  await page.mouse.move(1, 1);
}

async function checkDownloads(page, url) {
  const [csvDownload] = await Promise.all([
    page.waitForEvent('download'), page.locator('[data-testid="cosine-csv"]').click(),
  ]);
  const csv = fs.readFileSync(await csvDownload.path(), 'utf8').trim().split('\n');
  check(csv[0] === 'step,layer,head,qk_mean_cosine', `CSV header: ${csv[0]}`);
  const api = await apiSeries(url, 'qk_mean_cosine');
  const want = api.map((p) => [p.step, p.layer, p.head, String(p.value)].join(',')).sort();
  const got = csv.slice(1).sort();
  check(got.length === want.length, `CSV has ${got.length} rows, the API ${want.length}`);
  got.forEach((row, i) => check(row === want[i], `CSV row ${row} differs from the API's ${want[i]}`));
  const [pngDownload] = await Promise.all([
    page.waitForEvent('download'), page.locator('[data-testid="cosine-png"]').click(),
  ]);
  const png = fs.readFileSync(await pngDownload.path());
  check(png.subarray(1, 4).toString() === 'PNG' && png.length > 10000, `PNG download is not a PNG (${png.length} bytes)`);
}

// Moves a step slider to `index` (as a user dragging it would).
async function slide(page, testid, index) {
  await page.locator(`[data-testid="${testid}"]`).evaluate((el, i) => {
    el.value = String(i);
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, index);
}

async function slideHeatmap(page, index) {
  await slide(page, 'heatmap-step', index);
  return (await summary(page)).heatmap.step;
}

// Polls the summary of view `name` until test(it) holds (10 s); returns it.
async function waitForView(page, name, test, what) {
  const deadline = Date.now() + 10000;
  for (;;) {
    const view = (await summary(page))[name];
    if (test(view)) return view;
    if (Date.now() > deadline) throw new Error(`${what}; the ${name} view shows ${JSON.stringify(view)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const single = (refs) => (refs && refs.length === 1 ? refs[0].value : NaN);
const panelRefs = (view, key) => (view.panels.find((p) => p.key === key) || {}).references;

// The dashed lines: the isotropic baseline where the API puts it (d_head for per-head
// cosines, heads x d_head for hidden states and concatenated heads), 0.3 on the sink
// panel, 0.05 on the p-values.
async function checkReferenceLines(url, s) {
  const run = (await apiGet(url, 'runs', {})).runs.find((r) => r.name === RUN);
  const p95 = async (dimension) => {
    const answer = await apiGet(url, 'isotropic_baseline', { dimension });
    check(answer.dimension === dimension && answer.cosineP95 > 0 && answer.cosineP95 < 1,
      `isotropic_baseline?dimension=${dimension}: ${JSON.stringify(answer)}`);
    return answer.cosineP95;
  };
  const [head, hidden] = [await p95(run.headDim), await p95(run.numHeads * run.headDim)];
  check(head > hidden, `the isotropic p95 of d=${run.headDim} (${head}) is not above that of ` +
    `the hidden size (${hidden})`);
  const want = [
    ['cosine grid', s.cosine.references, head],
    ['hidden-state anisotropy', panelRefs(s.hidden, 'hidden_anisotropy'), hidden],
    ['concatenated Q/K cosine', panelRefs(s.concat, 'qk_mean_cosine_concat'), hidden],
    ['runs side by side', panelRefs(s.runs, 'qk_mean_cosine_concat'), hidden],
    ['first-token mass', panelRefs(s.attention, 'attn_first_token_mass'), 0.3],
    ['correlation p-values', panelRefs(s.correlation, 'p_value'), 0.05],
  ];
  for (const [what, refs, value] of want) {
    check(single(refs) === value, `${what}: dashed line ${JSON.stringify(refs)}, want one at ${value}`);
  }
  check(!s.dot.references.length && !panelRefs(s.hidden, 'hidden_mean_norm').length,
    'a baseline is drawn on a chart that is not a cosine');
}

// The views of issue 12 against the API: each draws what the server answers for `steps`
// steps, the last one `lastStep`.
async function checkNewViews(url, s, steps, lastStep) {
  await checkReferenceLines(url, s);
  const concat = await apiSeries(url, 'qk_mean_cosine_concat');
  check(concat.length === LAYERS * steps && concat.every((p) => p.head === -1),
    `API qk_mean_cosine_concat: ${concat.length} points, want ${LAYERS} layers x ${steps} steps, head -1`);

  const cloud = await apiGet(url, 'token_cloud', { run: RUN, layer: 0, head: 0, basis: 'union' });
  const last = cloud.steps[cloud.steps.length - 1];
  check(cloud.steps.length === steps && last.step === lastStep && cloud.basis === 'union',
    `API token_cloud: ${cloud.steps.length} steps, last ${last.step}, basis ${cloud.basis}`);
  const tc = s.tokenCloud;
  check(tc.basis === 'union' && tc.step === lastStep && tc.tokens > 0 && tc.tokens === cloud.tokenSamples &&
    tc.q === tc.tokens && tc.k === tc.tokens && last.qX.length === tc.tokens,
  `token cloud shows ${JSON.stringify(tc)}; the API has ${cloud.tokenSamples} tokens at step ${last.step}`);
  check(tc.firstQ[0] === last.qX[0] && tc.firstQ[1] === last.qY[0] &&
    tc.explainedVariance === cloud.explainedVariance, 'token cloud: the drawn Q token 0 or explained variance is not the API\'s');

  check(s.spectrum.step === lastStep, `spectra show step ${s.spectrum.step}, want ${lastStep}`);
  for (let state = 0; state <= LAYERS; state++) {
    const answer = await apiGet(url, 'vectors', { run: RUN, kind: 'hidden_spectrum', layer: state });
    const at = answer.points.find((p) => p.step === lastStep);
    const curve = s.spectrum.curves[state];
    check(at && at.values.length > 1 && at.values[0] === 1 && curve.points === at.values.length &&
      curve.first === at.values[0], `spectrum of hidden state ${state}: drawn ${JSON.stringify(curve)}, ` +
      `the API has ${at ? at.values.length : 0} values`);
  }

  const correlation = await apiGet(url, 'correlation', { run: RUN });
  check(correlation.points.length === steps && correlation.points.every((p) => p.hiddenStates === LAYERS + 1 &&
    p.spearmanP >= 0 && p.spearmanP <= 1 && p.pearsonP >= 0 && p.pearsonP <= 1),
  `API correlation: ${JSON.stringify(correlation.points)}, want ${steps} steps over ${LAYERS + 1} hidden states`);

  const [a, b] = await Promise.all([RUN, RUN_B].map((run) => apiSeries(url, 'qk_mean_cosine_concat', run)));
  const at = (points, step) => points.find((p) => p.layer === 0 && p.step === step).value;
  check(s.runs.runs.join() === [RUN, RUN_B].sort().join(), `runs view compares ${s.runs.runs}, want ${RUN}, ${RUN_B}`);
  check(s.runs.mean.map((m) => m.step).join() === '0,250' && s.runs.mean.every((m) =>
    Math.abs(m.value - (at(a, m.step) + at(b, m.step)) / 2) < 1e-12),
  `runs view mean ${JSON.stringify(s.runs.mean)}, want the mean of the two runs at steps 0 and 250`);
}

// The run's alarms (the API's) as markers at the step where each fired: in its layer's panel of
// the per-head entropy grid, once per step and rule on the layer means, on no other metric.
async function checkAlarmMarkers(page, url) {
  const alarms = (await apiGet(url, 'alarms', { run: RUN })).alarms;
  check(alarms.length === LAYERS && alarms.every((a) => a.rule === 'always' && a.metric === 'attn_entropy' &&
    a.state === 'ALARM_STATE_FIRING' && a.step === '0'),
  `API alarms: ${JSON.stringify(alarms)}, want rule always firing at step 0 in each of ${LAYERS} layers`);
  const key = (m) => `${m.panel}@${m.step}:${m.rule}`;
  const want = alarms.map((a) => key({ panel: a.layer, step: a.step, rule: a.rule })).sort().join();
  const grid = await waitForView(page, 'entropyHeads', (v) => v.alarms.map(key).sort().join() === want,
    `the per-head entropy grid does not mark the API's alarms ${want}`);
  const means = (await summary(page)).entropy.alarms;
  check(means.length === 1 && key(means[0]) === '0@0:always',
    `the layer-mean entropy chart marks ${JSON.stringify(means)}, want one marker at step 0 (rule always)`);
  const s = await summary(page);
  for (const view of ['cosine', 'dot', 'hidden', 'attention']) {
    check(!s[view].alarms.length, `the ${view} view marks an alarm on another metric: ${JSON.stringify(s[view].alarms)}`);
  }
  return grid.alarms.length;
}

// The controls of the new views, each put back afterwards.
async function checkNewControls(page, url) {
  const q = await apiGet(url, 'token_cloud', { run: RUN, layer: 0, head: 0, basis: 'q' });
  await page.selectOption('[data-testid="token-cloud-basis"]', 'q');
  await waitForView(page, 'tokenCloud', (v) => v.basis === 'q' && v.explainedVariance === q.explainedVariance,
    `the basis switch to q does not show the API's q projection (explained variance ${q.explainedVariance})`);
  await page.selectOption('[data-testid="token-cloud-basis"]', 'union');
  await slide(page, 'token-cloud-step', 0);
  check((await summary(page)).tokenCloud.step === '0', 'the token-cloud slider at its start does not show step 0');
  await slide(page, 'token-cloud-step', 2);
  await slide(page, 'spectrum-step', 0);
  check((await summary(page)).spectrum.step === '0', 'the spectrum slider at its start does not show step 0');
  await slide(page, 'spectrum-step', 2);

  await page.selectOption('[data-testid="attention-mode"]', '0');
  const heads = (await summary(page)).attention.series;
  check(heads.length === 4 * HEADS && heads.every((x) => /^head \d+$/.test(x.name)),
    `attention view of layer 0 draws ${heads.map((x) => x.name)}, want its ${HEADS} heads in 4 panels`);
  await page.selectOption('[data-testid="attention-mode"]', 'mean');

  await page.locator(`[data-testid="runs-choice"] input[data-run="${RUN_B}"]`).uncheck();
  await waitForView(page, 'runs', (v) => v.runs.join() === RUN && !v.mean.length && v.series.length === 1,
    `unchecking ${RUN_B} does not leave one line`);
  await page.locator(`[data-testid="runs-choice"] input[data-run="${RUN_B}"]`).check();
  await waitForView(page, 'runs', (v) => v.mean.length === 2, `checking ${RUN_B} again does not bring back the mean`);
  const [runsCsv] = await Promise.all([
    page.waitForEvent('download'), page.locator('[data-testid="runs-csv"]').click(),
  ]);
  const header = fs.readFileSync(await runsCsv.path(), 'utf8').split('\n')[0];
  check(header === 'step,run,qk_mean_cosine_concat', `runs view CSV header: ${header}`);
}

async function main() {
  const { grpc, url } = await startServer();
  log(`server: gRPC ${grpc}, ${url}`);
  await submit(grpc, [0, 100, 250]);
  await submit(grpc, [0, 250], { run: RUN_B, from: (s) => (s ? 400 : 100) });
  log(`stored steps 0, 100, 250 of a ${LAYERS} x ${HEADS} BERT, and steps 0, 250 of ${RUN_B}`);

  const userData = fs.mkdtempSync(path.join(temp, 'chromium-'));
  browser = await chromium.launchPersistentContext(userData, {
    executablePath: CHROMIUM, headless: true, acceptDownloads: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = browser.pages()[0] || await browser.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  // The first load is refused (401, logged by the browser as a failed resource), then asks.
  page.on('console', (m) => m.type() === 'error' && !/401/.test(m.text()) &&
    problems.push(`console error: ${m.text()}`));
  let prompts = 0;
  page.on('dialog', (dialog) => {
    prompts += 1;
    check(dialog.type() === 'prompt', `the page opened a ${dialog.type()}, not a token prompt`);
    dialog.accept(READER);
  });
  await page.goto(`${url}?run=${RUN}&poll_ms=400`);
  let s = await waitForSteps(page, 3);
  check(prompts === 1, `the page asked for a token ${prompts} times, want once`);
  check(await page.evaluate(() => window.localStorage.getItem('anisoscope.token')) === READER,
    'the page did not keep the token in localStorage');
  checkSummary(s, 3, '250');
  // The run's one probe is named by the server's label (file, samples x length), then its id.
  const runInfo = await page.locator('#run-info').innerText();
  check(/ · probe probe\.jsonl · \d+ (x \d+|samples, [\d,]+ tokens) \(p[0-9a-f]+\)$/.test(runInfo),
    `the run's line does not name its probe by file, samples and length: ${runInfo}`);
  check(await page.locator('[data-testid="errors"]').isHidden(), 'the page shows an error: ' +
    await page.locator('[data-testid="errors"]').innerText());
  log(`page: ${s.cosine.panels} panels, ${s.cosine.series.length} series of 3 points; every view drawn`);
  await checkTooltip(page, url);
  await checkDownloads(page, url);
  check(await slideHeatmap(page, 0) === '0', 'the heatmap slider at its start does not show step 0');
  check(await slideHeatmap(page, 2) === '250', 'the heatmap slider at its end does not show step 250');
  log('tooltip shows the exact value; CSV matches the API; PNG downloads; the step slider works');
  log(`${await checkAlarmMarkers(page, url)} alarm markers drawn where the API's alarms fired`);
  await checkNewViews(url, s, 3, '250');
  await checkNewControls(page, url);
  log('token clouds, spectra, sharpness/sinks, correlations, concatenated cosine, runs side by side and ' +
    'the isotropic baselines show what the API answers; their controls work');
  await screenshots(page, '');

  await page.evaluate(() => { window.__notReloaded = true; });
  await submit(grpc, [400]);
  log('stored step 400');
  s = await waitForSteps(page, 4);
  checkSummary(s, 4, '400');
  await checkNewViews(url, s, 4, '400');
  await checkAlarmMarkers(page, url);
  check(await page.evaluate(() => window.__notReloaded === true), 'the page reloaded to show step 400');
  await page.locator('[data-testid="job-idle"]').filter({ hasText: '1/1 steps' })
    .waitFor({ timeout: 5000 }).catch(() => { throw new Error('the jobs line does not show the finished 1/1-step job'); });
  check(prompts === 1, `the page asked for the token again while polling (${prompts} prompts)`);
  log('polling picked up step 400 without a reload, with the token asked for once');
  await screenshots(page, '_after_poll');

  // --force rewrites step 100 in place (with step 250's weights): no new step appears, so
  // since_step alone would never show the new values.
  await submit(grpc, [100], { from: () => 250, force: true });
  const rewritten = (await apiSeries(url, 'qk_mean_cosine')).find((p) => p.layer === 0 && p.head === 0 && p.step === '100');
  await page.waitForFunction((want) => {
    const point = window.__anisoscope.store.series('qk_mean_cosine').get(0, 0).find((p) => p.stepText === '100');
    return point && point.value === want;
  }, rewritten.value, { timeout: 10000, polling: 100 }).catch(() => {
    throw new Error(`the page still shows the old step 100 after a --force job rewrote it (want ${rewritten.value})`);
  });
  log('polling picked up the values of a step rewritten by a --force job');
  // Step 100 now holds step 250's weights: the run's steps 100 and 250 share a fingerprint,
  // and the page marks step 250 as a duplicate of step 100.
  const duplicates = page.locator('[data-testid="duplicate-steps"]');
  await duplicates.filter({ hasText: 'step 250 has the same weights as step 100' })
    .waitFor({ timeout: 10000 }).catch(async () => {
      throw new Error(`the page does not mark step 250 as a duplicate of step 100: ` +
        `'${await duplicates.innerText().catch(() => '')}'`);
    });
  log('the page marks the step whose weights repeat an earlier step\'s');

  const steps = await page.evaluate(async () => {
    const { shortStep } = await import('./js/format.js');
    return [20000, 143000, 999999, 1000000, 1500000].map(shortStep);
  });
  check(steps.join(' ') === '20k 143k 1M 1M 1.5M', `readable steps: ${steps.join(' ')}`);

  const shot = await checkPythiaSteps({ page, startServer, cli, temp, fixture, shots: SHOTS, log, check });
  log(`Pythia's steps on a log axis: screenshot ${shot}`);
  check(!problems.length, `the page logged errors:\n${problems.join('\n')}`);
  log(`PASS (screenshots in ${SHOTS})`);
}

async function cleanup() {
  if (browser) await browser.close().catch(() => {});
  for (const server of servers.filter((s) => s.exitCode === null)) {
    server.kill('SIGTERM');
    const killer = setTimeout(() => server.kill('SIGKILL'), 5000);
    await new Promise((resolve) => server.once('exit', resolve));
    clearTimeout(killer);
  }
  fs.rmSync(temp, { recursive: true, force: true });
}

let failed = false;
try {
  await main();
} catch (err) {
  failed = true;
  console.error(`FAIL: ${err.message}`);
} finally {
  await cleanup();
}
process.exit(failed ? 1 : 0);
