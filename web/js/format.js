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

export const METRIC_LABELS = {
  qk_mean_cosine: 'Q/K mean cosine  cos(Q̄, K̄)',
  qk_mean_dot: 'Q/K mean scalar product  ⟨Q̄, K̄⟩',
  q_mean_norm: 'query mean norm  ‖Q̄‖',
  k_mean_norm: 'key mean norm  ‖K̄‖',
  attn_entropy: 'attention entropy (nats)',
  attn_max_prob: 'attention max probability  max_j p_ij',
  attn_median_prob: 'attention median probability  median_j p_ij',
  attn_min_prob: 'attention min probability  min_j p_ij',
  attn_first_token_mass: 'attention on the first token  p_i0',
  q_anisotropy: 'query anisotropy (mean pairwise cosine)',
  k_anisotropy: 'key anisotropy (mean pairwise cosine)',
  hidden_anisotropy: 'hidden-state anisotropy (mean pairwise cosine)',
  hidden_mean_norm: 'hidden-state mean norm  ‖mean h‖',
  hidden_isoscore: 'IsoScore',
  qk_mean_cosine_concat: 'Q/K mean cosine, heads concatenated',
};

export const PER_HEAD_METRICS = [
  'qk_mean_cosine', 'qk_mean_dot', 'q_mean_norm', 'k_mean_norm', 'attn_entropy',
  'attn_max_prob', 'attn_median_prob', 'attn_min_prob', 'attn_first_token_mass',
  'q_anisotropy', 'k_anisotropy',
];

// Per hidden state 0 … L (head −1).
export const HIDDEN_STATE_METRICS = [
  'hidden_anisotropy', 'hidden_mean_norm', 'hidden_sv_skewness', 'hidden_sv_median',
  'hidden_ev_1', 'hidden_ev_10', 'hidden_isoscore', 'hidden_token_uniformity',
  'hidden_first_token_uniformity', 'hidden_max_abs', 'hidden_median_abs',
];

// Per block 0 … L−1 (head −1).
export const BLOCK_METRICS = ['qk_mean_cosine_concat'];

// Cosines and mean pairwise cosines, with the vectors' dimension for the isotropic
// baseline: 'head' (d_head) or 'hidden' (the hidden size, heads × d_head).
export const BASELINE_SCOPE = {
  qk_mean_cosine: 'head',
  q_anisotropy: 'head',
  k_anisotropy: 'head',
  hidden_anisotropy: 'hidden',
  hidden_token_uniformity: 'hidden',
  hidden_first_token_uniformity: 'hidden',
  qk_mean_cosine_concat: 'hidden',
};

// The dimension of `scope` ('head' or 'hidden') vectors of a run.
export function baselineDimension(run, scope) {
  return scope === 'head' ? run.headDim : run.numHeads * run.headDim;
}

// The labelled dashed line of an isotropic_baseline answer, for a view's references.
export function baselineReference({ dimension, cosineP95 }) {
  return { value: cosineP95, label: `isotropic p95 (d=${dimension})` };
}

export function metricLabel(metric) {
  return METRIC_LABELS[metric] || metric;
}

// "JOB_STATE_RUNNING" -> "running".
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
