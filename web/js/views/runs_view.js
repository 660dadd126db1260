// Runs side by side (Godey et al., Figure 23: MultiBERTs seeds): one metric of one layer
// (and head) in several runs, one line per run, with the mean across the runs and a band
// from their minimum to their maximum at the steps every chosen run has stored.

import { createHeadPicker, createLoader, createSelect } from '../card.js';
import { headColor, TEXT } from '../charts.js';
import {
  BASELINE_SCOPE, baselineDimension, baselineReference, BLOCK_METRICS, HIDDEN_STATE_METRICS, metricLabel,
  PER_HEAD_METRICS,
} from '../format.js';
import { StepPanelsView } from './step_panels_view.js';

const BAND = '#9aa5b1';
// The metric choices, from the catalogue (loaded before the views are built).
const metricOptions = () => [
  ...PER_HEAD_METRICS.map((m) => [m, `per head · ${m}`]),
  ...BLOCK_METRICS.map((m) => [m, `per layer · ${m}`]),
  ...HIDDEN_STATE_METRICS.map((m) => [m, `per hidden state · ${m}`]),
];

// The steps every run has: [{step, stepText, values: one per run}].
function aligned(pointLists) {
  const byStep = new Map();
  pointLists.forEach((points, i) => {
    for (const p of points) {
      const at = byStep.get(p.stepText) || { step: p.step, stepText: p.stepText, values: [] };
      at.values[i] = p.value;
      byStep.set(p.stepText, at);
    }
  });
  return [...byStep.values()].filter((at) => pointLists.every((_, i) => at.values[i] !== undefined))
    .sort((a, b) => a.step - b.step);
}

export class RunsView extends StepPanelsView {
  constructor(store, parent) {
    super(store, parent, {
      id: 'runs', title: 'Runs side by side', subtitle: '', keyColumns: ['run'],
      panels: [{ key: 'qk_mean_cosine_concat' }],
    });
    this.metric = 'qk_mean_cosine_concat';
    this.chosen = new Set();  // run names
    this.answer = null;
    createSelect(this.card.controls, {
      label: 'metric', testid: 'runs-metric', options: metricOptions(), value: this.metric,
      onChange: (m) => { this.metric = m; this.resetPicker(); this.load(); },
    });
    this.picker = createHeadPicker(this.card.controls, { testid: 'runs', onChange: () => this.load() });
    this.boxes = document.createElement('div');
    this.boxes.className = 'control run-boxes';
    this.boxes.dataset.testid = 'runs-choice';
    this.card.controls.appendChild(this.boxes);
    this.loader = createLoader(this.card, (answer) => { this.answer = answer; this.render(); });
    store.follow((run) => {
      // By default the runs shaped like the chosen one (seeds of one model).
      const same = (r) => run && r.modelFamily === run.modelFamily && r.numLayers === run.numLayers &&
        r.numHeads === run.numHeads && r.headDim === run.headDim;
      this.chosen = new Set(store.runs.filter(same).map((r) => r.name));
      this.resetPicker();
    }, () => this.load());
  }

  scope() {
    if (BLOCK_METRICS.includes(this.metric)) return 'block';
    return HIDDEN_STATE_METRICS.includes(this.metric) ? 'hidden' : 'head';
  }

  resetPicker() {
    const run = this.store.run;
    const scope = this.scope();
    this.picker.reset(run && run.numLayers + (scope === 'hidden' ? 1 : 0), scope === 'head' && run ? run.numHeads : 0);
  }

  fileBase() {
    const head = this.scope() === 'head' ? `_head${this.picker.head}` : '';
    return `${super.fileBase()}_${this.metric}_layer${this.picker.layer}${head}`;
  }

  renderBoxes() {
    const caption = Object.assign(document.createElement('span'), { textContent: 'runs' });
    this.boxes.replaceChildren(caption, ...this.store.runs.map((r) => {
      const label = document.createElement('label');
      label.innerHTML = '<input type="checkbox"><span></span>';
      const box = label.querySelector('input');
      box.dataset.run = r.name;
      box.checked = this.chosen.has(r.name);
      box.addEventListener('change', () => {
        if (box.checked) this.chosen.add(r.name);
        else this.chosen.delete(r.name);
        this.load();
      });
      label.querySelector('span').textContent = r.name;
      return label;
    }));
  }

  load() {
    this.renderBoxes();
    const runs = this.store.runs.filter((r) => this.chosen.has(r.name));
    if (!this.store.run || !runs.length) { this.answer = null; this.render(); return; }
    const { metric } = this;
    const { layer, head } = this.picker;
    const perHead = this.scope() === 'head';
    const scope = BASELINE_SCOPE[metric];
    const dimensions = scope ? [...new Set(runs.map((r) => baselineDimension(r, scope)))] : [];
    this.loader(async () => {
      const [series, baselines] = await Promise.all([
        Promise.all(runs.map((r) => this.store.runSeries(r, metric, layer, perHead ? head : undefined))),
        Promise.all(dimensions.map((d) => this.store.isotropicBaseline(d))),
      ]);
      return {
        metric, runs, baselines: baselines.filter(Boolean),
        points: series.map((s) => s.get(layer, perHead ? head : -1)),
      };
    });
  }

  render() {
    const where = this.scope() === 'head' ? `layer ${this.picker.layer}, head ${this.picker.head}`
      : this.scope() === 'hidden' ? `hidden state ${this.picker.layer}` : `layer ${this.picker.layer}`;
    this.panels = [{ key: this.metric, title: `${metricLabel(this.metric)} · ${where}`, yName: this.metric }];
    this.card.setSubtitle('One line per chosen run; the black line is their mean and the grey band spans ' +
      'their minimum to maximum, both over the steps every chosen run has stored.');
    super.render();
  }

  emptyMessage() {
    return this.answer ? 'The chosen runs have no values of this metric here yet.' : 'Choose one or more runs.';
  }

  lines() {
    const a = this.answer;
    if (!a || a.metric !== this.metric) return [];
    const runs = a.runs.map((run, i) => ({
      name: run.name, key: [run.name], color: headColor(i), points: a.points[i],
      style: { lineStyle: { width: 1.5 } },
    }));
    if (runs.length < 2) return runs;
    const common = aligned(a.points);
    const at = (f) => common.map((c) => ({ step: c.step, stepText: c.stepText, ...f(c.values) }));
    // Stacked: the max line is drawn at max − min on top of the min line, filled down to it.
    const band = {
      stack: 'band', stackStrategy: 'all', symbol: 'none', lineStyle: { opacity: 0 }, emphasis: { disabled: true },
    };
    return [
      ...runs,
      {
        name: `mean of ${runs.length} runs`, key: ['mean'], color: TEXT,
        points: at((v) => ({ value: v.reduce((s, x) => s + x, 0) / v.length })),
        style: { lineStyle: { width: 2.5 }, z: 3 },
      },
      {
        name: 'min … max', tip: 'min', key: ['min'], color: BAND, style: band,
        points: at((v) => ({ value: Math.min(...v) })),
      },
      {
        name: 'min … max', tip: 'max', key: ['max'], color: BAND,
        style: { ...band, areaStyle: { color: BAND, opacity: 0.3 } },
        points: at((v) => ({ value: Math.max(...v) - Math.min(...v), exact: Math.max(...v) })),
      },
    ];
  }

  references() {
    return this.answer ? this.answer.baselines.map(baselineReference) : [];
  }

  summary() {
    const common = this.drawn.length ? this.drawn[0].lines.find((l) => l.key[0] === 'mean') : null;
    return {
      ...super.summary(), metric: this.metric, layer: this.picker.layer, head: this.picker.head,
      runs: [...this.chosen].sort(),
      mean: common ? common.points.map((p) => ({ step: p.stepText, value: p.value })) : [],
    };
  }
}
