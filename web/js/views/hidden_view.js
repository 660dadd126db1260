// Hidden-state anisotropy and mean norm per hidden-state index (0 = embedding output,
// L = last layer) across steps: two panels side by side, one line per hidden state.

import { createCard } from '../card.js';
import { baseOption, createChart, layerColor, stepAxis, valueAxis } from '../charts.js';
import { downloadCsv, downloadPng, fileName } from '../download.js';
import { exactStep, exactValue, toCsv } from '../format.js';

const PANELS = [
  { metric: 'hidden_anisotropy', title: 'anisotropy (mean pairwise cosine)' },
  { metric: 'hidden_mean_norm', title: 'mean norm  ‖mean h‖' },
];

const stateName = (index) => (index === 0 ? 'embeddings (0)' : `after layer ${index - 1} (${index})`);

export class HiddenView {
  constructor(store, parent) {
    this.store = store;
    this.info = [];
    this.card = createCard(parent, {
      id: 'hidden',
      title: 'Hidden-state anisotropy and mean norm',
      subtitle: 'Per hidden state: 0 is the embedding output, i the output of layer i−1.',
      onPng: () => downloadPng(fileName(store.run && store.run.name, 'hidden_states') + '.png', this.chart),
      onCsv: () => downloadCsv(fileName(store.run && store.run.name, 'hidden_states') + '.csv', this.csv()),
    });
    this.card.body.classList.add('chart', 'chart-single');
    this.chart = createChart(this.card.body, () => this.render());
    for (const { metric } of PANELS) store.wantedMetrics.add(metric);
    store.on('run', () => this.render());
    store.on('data', ({ metrics }) => PANELS.some((p) => metrics.includes(p.metric)) && this.render());
  }

  render() {
    const run = this.store.run;
    const states = run ? run.numLayers + 1 : 0;
    const empty = PANELS.every(({ metric }) => this.store.series(metric).byKey.size === 0);
    if (!run || empty) {
      this.card.setMessage(run ? 'No hidden-state metrics stored for this run and probe yet.' : 'Choose a run.');
      this.chart.clear();
      this.info = [];
      return;
    }
    this.card.setMessage('');
    const option = baseOption();
    option.legend = { type: 'scroll', right: 8, top: 'middle', orient: 'vertical', textStyle: { fontSize: 12 } };
    const width = this.card.body.clientWidth;
    const panel = Math.max(120, (width - 72 - 180 - 90) / 2);
    const lefts = [72, 72 + panel + 90];
    option.title = PANELS.map((p, i) => ({
      text: p.title, left: lefts[i], top: 0, textStyle: { fontSize: 13, fontWeight: 600 },
    }));
    option.grid = lefts.map((left) => ({ left, width: panel, top: 36, bottom: 52 }));
    option.xAxis = PANELS.map((p, i) => stepAxis({ gridIndex: i, nameGap: 30 }));
    option.yAxis = PANELS.map((p, i) => valueAxis({
      gridIndex: i, name: i === 0 ? 'mean pairwise cosine' : '‖mean h‖',
      nameLocation: 'middle', nameGap: 50,
    }));
    option.series = [];
    this.info = [];
    PANELS.forEach(({ metric }, i) => {
      const series = this.store.series(metric);
      for (let s = 0; s < states; s++) {
        const points = series.get(s, -1);
        this.info.push({ metric, state: s, points: points.length });
        option.series.push({
          type: 'line', name: stateName(s), xAxisIndex: i, yAxisIndex: i,
          data: points.map((p) => ({ value: [p.step, p.value], stepText: p.stepText })),
          showSymbol: points.length <= 40, symbolSize: 5, lineStyle: { width: 2 },
          color: layerColor(s, states), emphasis: { focus: 'series' },
        });
      }
    });
    option.tooltip = {
      ...option.tooltip, trigger: 'axis',
      formatter: (params) => {
        if (!params.length) return '';
        const metric = this.info[params[0].seriesIndex].metric;
        const rows = params.map((p) => `<tr><td>${p.marker}${p.seriesName}</td>` +
          `<td class="num">${exactValue(p.data.value[1])}</td></tr>`);
        return `<div class="tip"><b>${metric}</b> · step ${exactStep(params[0].data.stepText)}` +
          `<table>${rows.join('')}</table></div>`;
      },
    };
    this.chart.setOption(option, { notMerge: true });
  }

  csv() {
    const run = this.store.run;
    const rows = [];
    if (run) {
      const anis = this.store.series('hidden_anisotropy');
      const norm = this.store.series('hidden_mean_norm');
      for (let s = 0; s <= run.numLayers; s++) {
        const byStep = new Map();
        for (const p of anis.get(s, -1)) byStep.set(p.stepText, { p, a: p.value, n: '' });
        for (const p of norm.get(s, -1)) {
          const row = byStep.get(p.stepText) || { p, a: '' };
          row.n = p.value;
          byStep.set(p.stepText, row);
        }
        [...byStep.values()].sort((x, y) => x.p.step - y.p.step)
          .forEach(({ p, a, n }) => rows.push([p.stepText, s, exactValue(a), exactValue(n)]));
      }
    }
    return toCsv(['step', 'hidden_state', 'hidden_anisotropy', 'hidden_mean_norm'], rows);
  }

  summary() {
    return { series: this.info.map((s) => ({ ...s })) };
  }
}
