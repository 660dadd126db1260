// Formatting shared by every view: readable steps (20k, 1.5M) on axes, exact values in
// tooltips and CSV, and the metric names as people read them.

// "20k", "1.5M", "250": for axis labels. Exact steps go through exactStep.
const STEP_UNITS = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];

export function shortStep(step) {
  const n = Number(step);
  const round = (x) => Math.round(x * 100) / 100;
  for (let i = 0; i < STEP_UNITS.length; i++) {
    const [scale, unit] = STEP_UNITS[i];
    if (Math.abs(n) < scale) continue;
    // 999,999 would read "1000k": say "1M".
    if (i > 0 && Math.abs(round(n / scale)) >= 1000) {
      const [up, upUnit] = STEP_UNITS[i - 1];
      return `${round(n / up)}${upUnit}`;
    }
    return `${round(n / scale)}${unit}`;
  }
  return String(round(n));
}

// The step as an integer with thousands separators: "1,500,000".
export function exactStep(step) {
  return BigInt(String(step)).toLocaleString('en-US');
}

// Full precision (the shortest string that reads back as the same double).
export function exactValue(value) {
  if (value === null || value === undefined) return '';
  return String(value);
}

// A compact value for axis labels.
export function shortValue(value) {
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (abs >= 1e4 || abs < 1e-3) return value.toExponential(1);
  return String(Number(value.toPrecision(3)));
}

// The metric catalogue (GET /api/v1/metrics-catalog: the server's one list of metrics, its
// labels and scopes). main.js loads it with setMetricCatalog before it builds the views; the
// lists and the map below are filled in place, in the catalogue's order.
const CATALOG = new Map();  // name -> MetricInfo, as the API writes it

// Scalar metrics per head, per hidden state 0 … L (head −1) and per block 0 … L−1 (head −1).
export const PER_HEAD_METRICS = [];
export const HIDDEN_STATE_METRICS = [];
export const BLOCK_METRICS = [];

// Cosines and mean pairwise cosines, with the vectors' dimension for the isotropic
// baseline: 'head' (d_head) or 'hidden' (the hidden size, heads × d_head).
export const BASELINE_SCOPE = {};

export function setMetricCatalog(metrics) {
  const lists = { head: PER_HEAD_METRICS, hidden_state: HIDDEN_STATE_METRICS, block: BLOCK_METRICS };
  for (const list of Object.values(lists)) list.length = 0;
  for (const key of Object.keys(BASELINE_SCOPE)) delete BASELINE_SCOPE[key];
  CATALOG.clear();
  for (const metric of metrics) {
    CATALOG.set(metric.name, metric);
    if (metric.kind !== 'scalar') continue;
    if (lists[metric.scope]) lists[metric.scope].push(metric.name);
    if (metric.baseline) BASELINE_SCOPE[metric.name] = metric.baseline;
  }
}

// The dimension of `scope` ('head' or 'hidden') vectors of a run.
export function baselineDimension(run, scope) {
  return scope === 'head' ? run.headDim : run.numHeads * run.headDim;
}

// The labelled dashed line of an isotropic_baseline answer, for a view's references.
export function baselineReference({ dimension, cosineP95 }) {
  return { value: cosineP95, label: `isotropic p95 (d=${dimension})` };
}

// {min, max} of a metric's values from its catalogue unit, which states its range ("[-1, 1]",
// "nats, [0, ln n]", "≥ 0", "(0, 1]"): the bounds that are numbers; {} when it names none.
function unitRange(unit) {
  const text = String(unit || '');
  const interval = text.match(/[[(]\s*([^,\])]+?)\s*,\s*([^\])]+?)\s*[\])]/);
  const number = (s) => (s !== undefined && /^[-+]?\d+(\.\d+)?$/.test(s.trim()) ? Number(s) : undefined);
  if (interval) return { min: number(interval[1]), max: number(interval[2]) };
  const atLeast = text.match(/^\s*≥\s*([-+]?\d+(\.\d+)?)\s*$/);
  return atLeast ? { min: Number(atLeast[1]) } : {};
}

// The range a metric's values can take, from the catalogue: {min, max}, either absent.
export function metricRange(metric) {
  const info = CATALOG.get(metric);
  return info ? unitRange(info.unit) : {};
}

export function metricLabel(metric) {
  const info = CATALOG.get(metric);
  return info && info.label ? info.label : metric;
}

// "JOB_STATE_RUNNING" -> "running".
// A probe as people name it: the server's label ("probe.jsonl · 128 x 512") then its id;
// a probe stored without a label by its id, samples and tokens.
export function probeLabel(probe) {
  return probe.description ? `${probe.description} (${probe.id})`
    : `${probe.id} · ${probe.numSamples} samples, ${probe.numTokens} tokens`;
}

export function enumName(value, prefix) {
  return String(value || '').replace(prefix, '').toLowerCase();
}

// One CSV document from a header and rows; fields are quoted only when they must be.
export function toCsv(header, rows) {
  const field = (x) => {
    const s = x === null || x === undefined ? '' : String(x);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [header, ...rows].map((row) => row.map(field).join(',')).join('\n') + '\n';
}

// A series' remote source as the CLI names it: "hub:ORG/NAME", "hub:ORG/NAME{}" or
// "s3://BUCKET/PREFIX/" (a Job's `source`, the protobuf JSON of CheckpointSource); '' for none.
export function describeSource(source) {
  if (!source) return '';
  if (source.hub) return `hub:${source.hub}`;
  if (source.hubRepos) return `hub:${source.hubRepos}`;
  return source.s3 || '';
}

// A byte count in binary units, as the CLI prints it ("1.2 GiB"); int64 fields arrive as
// strings in protobuf JSON.
export function byteSize(bytes) {
  let value = Number(bytes) || 0;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

// A remote step's download as its worker last reported it (a CheckpointStatus's `fetch`):
// "step 3000 fetching 1.2 GiB/3.4 GiB at 180.0 MiB/s, cache 12.0 GiB"; '' when none.
export function describeFetch(checkpoint) {
  const fetch = checkpoint && checkpoint.fetch;
  if (!fetch) return '';
  return `step ${checkpoint.step} fetching ${byteSize(fetch.bytesDone)}/${byteSize(fetch.bytesTotal)}` +
    ` at ${byteSize(fetch.bytesPerSecond)}/s, cache ${byteSize(fetch.cacheBytes)}`;
}
