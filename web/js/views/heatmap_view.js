// A layer x head heatmap of any per-head metric at one step, with a step slider. The colour
// scale spans the metric over all stored steps, so moving the slider compares like with
// like; metrics that change sign get a diverging scale centred on 0. For a cosine the
// subtitle gives the isotropic baseline in d_head dimensions.

import { createSelect, createStepSlider, createViewCard } from '../card.js';
import { baseOption, createChart, MUTED, VIRIDIS_STOPS } from '../charts.js';
import { fileName } from '../download.js';
import {
  BASELINE_SCOPE, exactStep, exactValue, metricLabel, PER_HEAD_METRICS, shortStep, shortValue, toCsv,
} from '../format.js';

const DIVERGING = ['#2166ac', '#67a9cf', '#d1e5f0', '#f7f7f7', '#fddbc7', '#ef8a62', '#b2182b'];

export class HeatmapView {
  constructor(store, parent) {
    this.store = store;
    this.metric = 'qk_mean_cosine';
    this.cells = [];
    this.card = createViewCard(parent, this, {
      id: 'heatmap', title: 'Layer × head heatmap', subtitle: 'One metric for every head at the chosen step.',
    });
    createSelect(this.card.controls, {
      label: 'metric', testid: 'heatmap-metric', value: this.metric,
      options: PER_HEAD_METRICS.map((m) => [m, m]),
      onChange: (m) => {
        this.metric = m;
        store.ensureMetric(m).then(() => this.render());
      },
    });
    this.slider = createStepSlider(this.card.controls, { testid: 'heatmap-step', onChange: () => this.render() });
    this.card.body.classList.add('chart', 'chart-heatmap');
    this.chart = createChart(this.card.body);
    store.wantedMetrics.add(this.metric);
    store.on('run', () => { this.slider.reset(); this.render(); });
    store.on('data', ({ metrics }) => metrics.includes(this.metric) && this.render());
  }

  fileBase() {
    const step = this.currentStep();
    return fileName(this.store.run && this.store.run.name, this.metric, step && `step${step.text}`);
  }

  steps() {
    return this.store.series(this.metric).steps();
  }

  currentStep() {
    const steps = this.steps();
    const index = this.slider.pick(steps.length);
    return index < 0 ? null : steps[index];
  }

  render() {
    const run = this.store.run;
    const series = this.store.series(this.metric);
    this.slider.show(this.steps().map((x) => x.text));
    const step = this.currentStep();
    if (!run || !step) {
      this.card.setMessage(run ? `No ${this.metric} stored for this run and probe yet.` : 'Choose a run.');
      this.chart.clear();
      this.cells = [];
      return;
    }
    this.card.setMessage('');
    const layers = run.numLayers;
    const heads = run.numHeads;
    let lo = Infinity;
    let hi = -Infinity;
    this.cells = [];
    for (let l = 0; l < layers; l++) {
      for (let h = 0; h < heads; h++) {
        const points = series.get(l, h);
        for (const p of points) { lo = Math.min(lo, p.value); hi = Math.max(hi, p.value); }
        const at = points.find((p) => p.stepText === step.text);
        if (at) this.cells.push({ layer: l, head: h, value: at.value, stepText: at.stepText });
      }
    }
    const diverging = lo < 0 && hi > 0;
    if (diverging) { hi = Math.max(-lo, hi); lo = -hi; }
    if (lo === hi) { lo -= 1e-9; hi += 1e-9; }
    const cellHeight = Math.max(16, Math.min(34, 460 / layers));
    this.card.body.style.height = `${layers * cellHeight + 110}px`;
    this.chart.resize();
    const showLabels = heads <= 16 && cellHeight >= 18;
    const option = baseOption();
    const gridWidth = Math.min(this.card.body.clientWidth - 200, heads * 96);
    option.grid = { left: 80, width: gridWidth, top: 16, bottom: 56 };
    option.xAxis = {
      type: 'category', name: 'head', nameLocation: 'middle', nameGap: 30,
      nameTextStyle: { color: MUTED }, data: [...Array(heads).keys()].map(String), splitArea: { show: false },
    };
    option.yAxis = {
      type: 'category', name: 'layer', nameLocation: 'middle', nameGap: 40, inverse: true,
      nameTextStyle: { color: MUTED }, data: [...Array(layers).keys()].map(String),
    };
    option.visualMap = {
      min: lo, max: hi, calculable: true, orient: 'vertical', left: 80 + gridWidth + 28, top: 'middle',
      itemHeight: Math.min(240, layers * cellHeight),
      inRange: { color: diverging ? DIVERGING : VIRIDIS_STOPS }, textStyle: { color: MUTED },
      formatter: (v) => shortValue(v),
    };
    option.series = [{
      type: 'heatmap', name: this.metric,
      data: this.cells.map((c) => {
        // White text on the dark ends of the scale.
        const t = (c.value - lo) / (hi - lo);
        const dark = diverging ? Math.abs(t - 0.5) > 0.3 : t < 0.55;
        return { value: [c.head, c.layer, c.value], cell: c, label: { color: dark ? '#fff' : '#1f2933' } };
      }),
      label: { show: showLabels, formatter: (p) => shortValue(p.data.value[2]), fontSize: 10 },
      itemStyle: { borderColor: '#fff', borderWidth: 1 },
      emphasis: { itemStyle: { borderColor: '#1f2933', borderWidth: 1.5 } },
    }];
    option.tooltip = {
      ...option.tooltip, trigger: 'item',
      formatter: (p) => `<div class="tip"><b>layer ${p.data.cell.layer}, head ${p.data.cell.head}</b>` +
        ` · step ${exactStep(p.data.cell.stepText)}<br>${this.metric} = ` +
        `<span class="num">${exactValue(p.data.cell.value)}</span></div>`,
    };
    const [baseline] = this.store.baselineLines(BASELINE_SCOPE[this.metric]);
    this.card.setSubtitle(`${metricLabel(this.metric)} for every head at step ${shortStep(step.step)}; ` +
      `the colour scale spans all stored steps.${baseline ? ` ${baseline.label}: ${shortValue(baseline.value)}.` : ''}`);
    this.chart.setOption(option, { notMerge: true });
  }

  csv() {
    return toCsv(['step', 'layer', 'head', this.metric],
      this.cells.map((c) => [c.stepText, c.layer, c.head, exactValue(c.value)]));
  }

  summary() {
    const step = this.currentStep();
    return { metric: this.metric, step: step ? step.text : null, steps: this.steps().length, cells: this.cells.length };
  }
}
