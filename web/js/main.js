// Entry point: reads the URL (run, probe, poll_ms), builds the views, loads the runs and
// starts polling. window.__anisoscope is a read-only view of the page's state for tests.

import { api } from './api.js';
import { createSelect } from './card.js';
import { probeLabel, setMetricCatalog, shortStep } from './format.js';
import { Store } from './state.js';
import { AttentionView } from './views/attention_view.js';
import { CorrelationView } from './views/correlation_view.js';
import { EntropyView } from './views/entropy_view.js';
import { HeadGridView } from './views/head_grid_view.js';
import { HeatmapView } from './views/heatmap_view.js';
import { HiddenView } from './views/hidden_view.js';
import { JobsView } from './views/jobs_view.js';
import { RunsView } from './views/runs_view.js';
import { SpectrumView } from './views/spectrum_view.js';
import { TokenCloudView } from './views/token_cloud_view.js';
import { TrajectoryView } from './views/trajectory_view.js';

const params = new URLSearchParams(window.location.search);
const pollMs = Math.max(100, Number(params.get('poll_ms')) || 3000);
const store = new Store();
const $ = (sel) => document.querySelector(sel);

// The metric catalogue first: the views' metric lists, labels and baselines come from it.
try {
  setMetricCatalog(await api.metricsCatalog());
} catch (err) {
  store.setError('catalog', `the metric catalogue: ${err.message}`);
}

const views = {
  cosine: new HeadGridView(store, $('#views'), {
    id: 'cosine', metric: 'qk_mean_cosine', yName: 'cos(Q̄, K̄)',
    title: 'Q/K mean cosine per head',
    subtitle: 'Cosine between the mean query Q̄ and the mean key K̄ of each head; one panel per layer, ' +
      'one line per head; dashed: the isotropic baseline in d_head dimensions.',
  }),
  concat: new HiddenView(store, $('#views'), {
    id: 'qk-concat', title: 'Q/K mean cosine per layer, heads concatenated', perBlock: true,
    subtitle: 'cos(Q̄, K̄) with Q̄ and K̄ the per-head means concatenated over the heads of each layer ' +
      '(Godey et al., Figure 23); dashed: the isotropic baseline in heads × d_head dimensions.',
    panels: [{ key: 'qk_mean_cosine_concat', title: 'cos(Q̄, K̄), heads concatenated', yName: 'cosine' }],
    maxColumns: 1,
  }),
  dot: new HeadGridView(store, $('#views'), {
    id: 'dot', metric: 'qk_mean_dot', yName: '⟨Q̄, K̄⟩',
    title: 'Q/K mean scalar product per head',
    subtitle: 'Scalar product ⟨Q̄, K̄⟩ of the mean query and key (before the 1/√d scale); one panel per layer.',
  }),
  entropy: new EntropyView(store, $('#views')),
  entropyHeads: new HeadGridView(store, $('#views'), {
    id: 'entropy-heads', metric: 'attn_entropy', yName: 'entropy (nats)',
    title: 'Attention entropy per head',
    subtitle: 'The heads behind the layer means above: one panel per layer, one line per head.',
  }),
  attention: new AttentionView(store, $('#views')),
  hidden: new HiddenView(store, $('#views'), {
    id: 'hidden', title: 'Hidden-state anisotropy and mean norm',
    subtitle: 'Per hidden state: 0 is the embedding output, i the output of layer i−1; dashed: the ' +
      'isotropic baseline in the hidden size.',
    panels: [
      { key: 'hidden_anisotropy', title: 'anisotropy (mean pairwise cosine)', yName: 'mean pairwise cosine' },
      { key: 'hidden_mean_norm', title: 'mean norm  ‖mean h‖', yName: '‖mean h‖' },
    ],
  }),
  correlation: new CorrelationView(store, $('#views')),
  spectrum: new SpectrumView(store, $('#views')),
  spectrumStats: new HiddenView(store, $('#views'), {
    id: 'spectrum-stats', title: 'Spectrum shape and isotropy per hidden state',
    subtitle: 'Skewness of the singular values, the share of the energy in the top 1 and 10 directions ' +
      '(Yan et al.) and IsoScore (1: isotropic; centered, so blind to a common offset).',
    panels: [
      { key: 'hidden_sv_skewness', title: 'singular value skewness', yName: 'skewness' },
      { key: 'hidden_ev_1', title: 'EV_1: energy in the top direction', yName: 'share' },
      { key: 'hidden_ev_10', title: 'EV_10: energy in the top 10', yName: 'share' },
      { key: 'hidden_isoscore', title: 'IsoScore', yName: 'IsoScore' },
    ],
    maxColumns: 2, panelHeight: 220,
  }),
  heatmap: new HeatmapView(store, $('#views')),
  trajectory: new TrajectoryView(store, $('#views')),
  tokenCloud: new TokenCloudView(store, $('#views')),
  runs: new RunsView(store, $('#views')),
};
const jobs = new JobsView(store, $('#jobs'));

const runSelect = createSelect($('#pickers'), {
  label: 'run', testid: 'run-select', options: [],
  onChange: (name) => choose(name, ''),
});
const probeSelect = createSelect($('#pickers'), {
  label: 'probe', testid: 'probe-select', options: [],
  onChange: (probe) => choose(store.run.name, probe),
});

async function choose(name, probe) {
  const url = new URL(window.location.href);
  url.searchParams.set('run', name);
  if (probe) url.searchParams.set('probe', probe);
  else url.searchParams.delete('probe');
  window.history.replaceState(null, '', url);
  await store.selectRun(name, probe);
}

function describeRun(run) {
  if (!run) return '';
  const steps = run.steps || [];
  const span = steps.length ? ` (${shortStep(steps[0])} … ${shortStep(steps[steps.length - 1])})` : '';
  return `${run.modelFamily} · ${run.numLayers} layers × ${run.numHeads} heads · d_head ${run.headDim}` +
    ` · ${steps.length} step${steps.length === 1 ? '' : 's'} stored${span}`;
}

// Steps whose weights are an earlier step's (equal fingerprints): a suite that served one
// checkpoint under two step names; their points repeat the earlier step's.
function describeDuplicates(run) {
  const duplicates = (run && run.duplicates) || [];
  return duplicates.map((d) => `⚠ step ${shortStep(d.step)} has the same weights as step ` +
    `${shortStep(d.duplicateOf)} (${d.fingerprint}): its points repeat that step's`).join('\n');
}

// Where a run's steps read from a remote series came from (Run.origins): each source with
// its count of steps and the first and last revision, e.g. "steps from
// hub:EleutherAI/pythia-160m: 3 steps, step1000 (commit 0123456789ab) … step3000 (…)".
function describeOrigins(run) {
  const origins = (run && run.origins) || [];
  const bySource = new Map();
  for (const o of origins) {
    if (!bySource.has(o.source)) bySource.set(o.source, []);
    bySource.get(o.source).push(o);
  }
  const at = (o) => `${o.revision}${o.commit ? ` (commit ${o.commit.slice(0, 12)})` : ''}`;
  return [...bySource].map(([source, list]) => {
    const span = list.length === 1 ? at(list[0]) : `${at(list[0])} … ${at(list[list.length - 1])}`;
    return `steps from ${source}: ${list.length} step${list.length === 1 ? '' : 's'}, ${span}`;
  }).join('\n');
}

function renderPickers() {
  runSelect.set(store.runs.map((r) => [r.name, r.name]), store.run ? store.run.name : undefined);
  const probes = store.run ? store.run.probes || [] : [];
  probeSelect.set(probes.map((p) => [p.id, probeLabel(p)]), store.probeId);
  probeSelect.wrap.hidden = probes.length < 2;
  // With one probe the picker is hidden: the run's line names it.
  $('#run-info').textContent = describeRun(store.run) +
    (probes.length === 1 ? ` · probe ${probeLabel(probes[0])}` : '');
  const duplicates = describeDuplicates(store.run);
  $('#duplicates').textContent = duplicates;
  $('#duplicates').hidden = !duplicates;
  const origins = describeOrigins(store.run);
  $('#origins').textContent = origins;
  $('#origins').hidden = !origins;
}

function renderErrors(messages) {
  const box = $('#errors');
  box.hidden = !messages.length;
  box.replaceChildren(...messages.map((m) => Object.assign(document.createElement('div'), { textContent: m })));
}

function renderPollInfo() {
  const at = store.lastPollAt ? new Date(store.lastPollAt).toLocaleTimeString() : '—';
  $('#poll-info').textContent = `live · every ${pollMs >= 1000 ? `${pollMs / 1000} s` : `${pollMs} ms`} · updated ${at}`;
}

store.on('run', renderPickers);
store.on('data', renderPickers);
store.on('error', renderErrors);
if (store.errors.size) renderErrors([...store.errors.values()]);  // the catalogue's, if any

window.__anisoscope = Object.freeze({
  store,
  views,
  get ready() { return ready; },
  get pollCount() { return store.pollCount; },
  summary: () => Object.fromEntries([
    ...Object.entries(views).map(([k, v]) => [k, v.summary()]), ['jobs', jobs.summary()],
  ]),
  // Viewport coordinates of a grid view's point, so that a test can hover it.
  pointOnViewport(viewId, layer, head, index) {
    const view = views[viewId];
    const point = view.store.series(view.metric).get(layer, head)[index];
    const [x, y] = view.chart.convertToPixel({ gridIndex: layer }, [view.stepScale.x(point.step), point.value]);
    const box = view.chart.getDom().getBoundingClientRect();
    return { x: box.left + x, y: box.top + y };
  },
  // A view's step axis on panel `panel`: its kind, its labels and the steps they name, and the
  // x pixel of each of `steps`.
  stepAxis(viewId, steps = [], panel = 0) {
    const view = views[viewId];
    const { axisLabel } = view.chart.getOption().xAxis[panel];
    return {
      kind: view.stepScale.kind,
      labels: axisLabel.customValues.map((v) => axisLabel.formatter(v)),
      steps: axisLabel.customValues.map((v) => view.stepScale.step(v)),
      x: steps.map((s) => view.chart.convertToPixel({ gridIndex: panel }, [view.stepScale.x(s), 0])[0]),
    };
  },
});

let ready = false;
(async () => {
  await store.loadRuns();
  renderPickers();
  const wanted = params.get('run');
  const first = store.runs.find((r) => r.name === wanted) || store.runs[0];
  if (first) await choose(first.name, params.get('probe') || '');
  else if (!store.errors.size) $('#empty').hidden = false;
  ready = true;
  document.body.dataset.ready = 'true';
  renderPollInfo();
  store.on('jobs', renderPollInfo);
  const tick = async () => {
    if (!store.run) {
      await store.loadRuns();
      const run = store.runs[0];
      if (run) { $('#empty').hidden = true; await choose(run.name, ''); }
    } else {
      await store.poll();
    }
    renderPollInfo();
    setTimeout(tick, pollMs);
  };
  setTimeout(tick, pollMs);
})();
