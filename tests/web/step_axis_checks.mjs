// The dashboard's step axis on a run with Pythia's 154 step names (0, 1, 2, 4, …, 512, then
// 1000, 2000, …, 143000), made cheaply from the bert_run fixture: each step's checkpoint is the
// fixture's step 0 moved towards its step 400 by log(step + 1) / log(143001), so that every
// step has its own weights (no step is a duplicate of another) and the curves change most
// where a log axis spreads them out, as training dynamics do. Served by a server of its own,
// whose rules fire alarms that stay firing and alarms that resolve. Used by
// dashboard_test.mjs.

import fs from 'node:fs';
import path from 'node:path';

export const PYTHIA_STEPS = [0, ...[...Array(10).keys()].map((i) => 2 ** i),
  ...[...Array(143).keys()].map((i) => 1000 * (i + 1))];

// The header (JSON) and data of a safetensors file.
function readSafetensors(file) {
  const bytes = fs.readFileSync(file);
  const headerSize = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerSize).toString('utf8'));
  return { bytes, header, dataStart: 8 + headerSize };
}

// Writes under `root` one directory per step of `steps` (step_N, with the config and
// vocabulary of `from`) whose weights lie between those of `from` and `to` (checkpoint
// directories of one shape, float32); returns {step: directory}.
export function writeInterpolatedRun(root, from, to, steps = PYTHIA_STEPS) {
  const a = readSafetensors(path.join(from, 'model.safetensors'));
  const b = readSafetensors(path.join(to, 'model.safetensors'));
  if (a.bytes.length !== b.bytes.length || a.dataStart !== b.dataStart) {
    throw new Error(`${from} and ${to} do not hold checkpoints of one shape`);
  }
  const floats = (s) => new Float32Array(s.bytes.buffer, s.bytes.byteOffset + s.dataStart,
    (s.bytes.length - s.dataStart) / 4);
  for (const [name, info] of Object.entries(a.header)) {
    if (name !== '__metadata__' && info.dtype !== 'F32') throw new Error(`${name} is ${info.dtype}, not F32`);
  }
  const [x, y] = [floats(a), floats(b)];
  const last = Math.log(Math.max(...steps) + 1);
  const out = Buffer.from(a.bytes);
  const mixed = floats({ bytes: out, dataStart: a.dataStart });
  const dirs = {};
  for (const step of steps) {
    const t = Math.log(step + 1) / last;
    for (let i = 0; i < x.length; i++) mixed[i] = x[i] + (y[i] - x[i]) * t;
    const dir = path.join(root, `step_${step}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'model.safetensors'), out);
    for (const file of fs.readdirSync(from)) {
      if (file !== 'model.safetensors') fs.copyFileSync(path.join(from, file), path.join(dir, file));
    }
    dirs[step] = dir;
  }
  return dirs;
}

const RUN = 'pythia-steps';
// One alarm per layer that stays firing (critical) at step 0, one over all layers that fires
// there and resolves once the entropy falls, and one that fires where it falls fastest.
const RULES = `[[rule]]
name = "always"
metric = "attn_entropy"
below = 1000.0
severity = "critical"

[[rule]]
name = "entropy_high"
metric = "attn_entropy"
over = "layers"
above = 3.0

[[rule]]
name = "entropy_drop"
metric = "attn_entropy"
over = "layers"
fall_by = 0.04
`;

// The checks, on `page` (whose errors the caller collects); startServer({db, roots, auth,
// rules}) and cli(grpc, args) are the caller's. Writes screenshots pythia_steps*.png to
// `shots` and returns the path of the whole page's.
export async function checkPythiaSteps({ page, startServer, cli, temp, fixture, shots, log, check }) {
  const root = path.join(temp, 'pythia');
  const checkpoint = (step) => path.join(fixture, 'safetensors', `step_${step}`);
  writeInterpolatedRun(root, checkpoint(0), checkpoint(400));
  const rules = path.join(temp, 'pythia_rules.toml');
  fs.writeFileSync(rules, RULES);
  const { grpc, url } = await startServer({
    db: path.join(temp, 'pythia.db'), roots: [root, fixture], auth: 'none', rules,
  });
  await cli(grpc, ['submit', '--run', RUN, '--checkpoints', root, '--probe-tokens',
    path.join(fixture, 'probe.jsonl'), '--wait']);
  log(`stored ${PYTHIA_STEPS.length} steps named as Pythia's (0 … 143000) on a second server`);

  const load = async () => {
    await page.goto(`${url}?run=${RUN}&poll_ms=400`);
    await page.waitForFunction((steps) => {
      const dashboard = window.__anisoscope;  // undefined until the page's script has run
      const s = dashboard && dashboard.ready && dashboard.summary();
      return s && s.cosine.series.length && s.cosine.series.every((x) => x.points === steps) &&
        s.entropy.series.length && s.entropy.series.every((x) => x.points === steps) && s.entropy.alarms.length;
    }, PYTHIA_STEPS.length, { timeout: 20000, polling: 100 }).catch(async (error) => {
      throw new Error(`the page does not show the ${PYTHIA_STEPS.length} steps (${error.message.split('\n')[0]}): ` +
        JSON.stringify((await page.evaluate(() => window.__anisoscope.summary())).cosine));
    });
  };
  const axis = (view, steps = []) => page.evaluate(([v, s]) => window.__anisoscope.stepAxis(v, s), [view, steps]);
  const summary = () => page.evaluate(() => window.__anisoscope.summary());
  await load();

  // Log axis, chosen by itself; early steps far apart; labels at the suite's own steps.
  let s = await summary();
  for (const view of ['cosine', 'dot', 'entropy', 'entropyHeads', 'hidden', 'concat', 'attention']) {
    check(s[view].stepAxis === 'log', `the ${view} chart's step axis is ${s[view].stepAxis}, want log for Pythia's steps`);
  }
  const early = [0, 1, 2, 4, 512, 143000];
  let a = await axis('cosine', early);
  const [x0, x1, x2, x4, x512, xLast] = a.x;
  const width = xLast - x0;
  check(x1 - x0 >= 12 && x2 - x1 >= 8 && x4 - x2 >= 8,
    `steps 0, 1, 2, 4 are at x ${a.x.slice(0, 4).map(Math.round)}: too close to read on a ${Math.round(width)}-pixel axis`);
  check((x512 - x0) / width > 0.45,
    `steps 0 … 512 take ${Math.round((100 * (x512 - x0)) / width)}% of the axis, want more than 45%`);
  check(a.steps.length >= 6 && a.steps.every((step) => PYTHIA_STEPS.includes(step)) && a.steps.includes(0) &&
    a.steps.includes(143000), `the step labels ${a.labels} are not at Pythia's own steps, first and last included`);
  log(`log axis: steps 0, 1, 2, 4 at x ${a.x.slice(0, 4).map(Math.round).join(', ')} of a ` +
    `${Math.round(width)}-pixel panel; labels ${a.labels.join(' ')}`);

  // Cosine axes within the catalogue's range, one range shared by the layers' panels.
  const catalogue = await (await fetch(new URL('api/v1/metrics-catalog', url))).json();
  const unit = catalogue.metrics.find((m) => m.name === 'qk_mean_cosine').unit;
  check(unit === '[-1, 1]', `the catalogue gives qk_mean_cosine the range '${unit}'`);
  const ranges = s.cosine.yRanges;
  check(ranges.length === s.cosine.panels && ranges.every((r) => r.min >= -1 && r.max <= 1 && r.min < r.max) &&
    ranges.every((r) => r.min === ranges[0].min && r.max === ranges[0].max),
  `cosine panels' y ranges ${JSON.stringify(ranges)}: want one range within [-1, 1]`);

  // Switched per chart, remembered across a reload.
  await page.selectOption('[data-testid="cosine-step-axis"]', 'linear');
  await page.selectOption('[data-testid="cosine-y-range"]', 'own');
  await load();
  s = await summary();
  a = await axis('cosine', early);
  check(s.cosine.stepAxis === 'linear' && a.x[2] - a.x[1] < 1 && s.entropy.stepAxis === 'log',
    `after choosing linear for the cosine chart and a reload: cosine ${s.cosine.stepAxis} (steps 1, 2 ` +
    `${(a.x[2] - a.x[1]).toFixed(2)} px apart), entropy ${s.entropy.stepAxis}`);
  check(await page.locator('[data-testid="cosine-y-range"]').inputValue() === 'own' &&
    s.cosine.yRanges.every((r) => r.min >= -1 && r.max <= 1), 'the per-layer y range is not kept across a reload');
  await page.selectOption('[data-testid="cosine-step-axis"]', 'auto');
  await page.selectOption('[data-testid="cosine-y-range"]', 'shared');
  check((await summary()).cosine.stepAxis === 'log', 'back on auto, the cosine chart is not on a log axis');
  log('the step axis and y range are switched per chart and kept across a reload');

  // Alarms: a critical one firing at step 0 in every layer's panel, resolved ones in grey;
  // the legend's swatch is red while one fires, grey when every alarm is resolved.
  s = await summary();
  const marked = new Set(s.entropy.alarms.map((m) => m.rule));
  check(marked.has('always') && marked.has('entropy_high'), `the entropy chart marks ${JSON.stringify(s.entropy.alarms)}`);
  const swatches = await page.evaluate(async () => {
    const { addAlarmMarkers } = await import('./js/charts.js');
    const swatch = (alarms) => {
      const series = [];
      addAlarmMarkers(series, 1, () => alarms, [{ x: (v) => v, xMin: 0, xMax: 10, yMax: 1, width: 300 }]);
      return series[0].color;
    };
    const alarm = (state, severity) => ({ step: '1', rule: 'r', layer: 0, severity, state, resolvedStep: '2' });
    const drawn = window.__anisoscope.views.entropy.chart.getOption().series.find((x) => x.name === 'alarms');
    return {
      page: drawn.color,
      resolved: swatch([alarm('ALARM_STATE_RESOLVED', 'critical')]),
      warning: swatch([alarm('ALARM_STATE_FIRING', 'warning'), alarm('ALARM_STATE_RESOLVED', 'critical')]),
    };
  });
  check(swatches.page === '#c53030' && swatches.warning === '#d69e2e' && swatches.resolved === '#7b8794',
    `alarm legend swatches ${JSON.stringify(swatches)}: want red while a critical alarm fires, amber for a ` +
    'warning, grey when all are resolved');

  fs.mkdirSync(shots, { recursive: true });
  const shot = path.join(shots, 'pythia_steps.png');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: shot, fullPage: true });
  for (const view of ['cosine', 'entropy', 'entropy-heads', 'hidden']) {
    await page.locator(`[data-testid="view-${view}"]`).screenshot({ path: path.join(shots, `pythia_steps_${view}.png`) });
  }
  return shot;
}
