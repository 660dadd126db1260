// Attention entropy per layer across steps: the mean over the layer's heads, one line per
// layer (Godey et al., Figure 15), with the run's attn_entropy alarms marked where they fired;
// the step axis is log or linear (step_axis.js, remembered).

import { createCard } from '../card.js';
import {
  addAlarmMarkers, baseOption, createChart, drawnAlarmMarkers, layerColor, valueAxis,
} from '../charts.js';
import { downloadCsv, downloadPng, fileName } from '../download.js';
import { exactStep, exactValue, metricRange, toCsv } from '../format.js';
import { createAxisChoices, StepScale, valueExtent } from '../step_axis.js';

const METRIC = 'attn_entropy';

// [{layer, points: [{step, stepText, value, heads}]}]: the mean over heads at each step.
export function meanOverHeads(series, layers, heads) {
  const out = [];
  for (let l = 0; l < layers; l++) {
    const byStep = new Map();
    for (let h = 0; h < heads; h++) {
      for (const p of series.get(l, h)) {
        const acc = byStep.get(p.stepText) || { step: p.step, stepText: p.stepText, sum: 0, heads: 0 };
        acc.sum += p.value;
        acc.heads += 1;
        byStep.set(p.stepText, acc);
      }
    }
    const points = [...byStep.values()].sort((a, b) => a.step - b.step)
      .map((a) => ({ step: a.step, stepText: a.stepText, value: a.sum / a.heads, heads: a.heads }));
    out.push({ layer: l, points });
  }
  return out;
}

export class EntropyView {
  constructor(store, parent) {
    this.store = store;
    this.lines = [];
    this.card = createCard(parent, {
      id: 'entropy',
      title: 'Attention entropy per layer',
      subtitle: 'Mean over the heads of each layer of the attention entropy (nats), one line per layer.',
      onPng: () => downloadPng(fileName(store.run && store.run.name, 'attn_entropy_by_layer') + '.png', this.chart),
      onCsv: () => downloadCsv(fileName(store.run && store.run.name, 'attn_entropy_by_layer') + '.csv', this.csv()),
    });
    this.axes = createAxisChoices(this.card.controls, { id: 'entropy', onChange: () => this.render() });
    this.stepScale = new StepScale([], 'linear');
    this.card.body.classList.add('chart', 'chart-single');
    this.width = 0;
    this.chart = createChart(this.card.body, () => {
      if (Math.abs(this.card.body.clientWidth - this.width) > 4) this.render();
    });
    store.wantedMetrics.add(METRIC);
    store.on('run', () => this.render());
    store.on('data', ({ metrics }) => metrics.includes(METRIC) && this.render());
    store.on('alarms', () => this.render());
  }

  render() {
    const run = this.store.run;
    const series = this.store.series(METRIC);
    if (!run || series.byKey.size === 0) {
      this.card.setMessage(run ? 'No attention entropy stored for this run and probe yet.' : 'Choose a run.');
      this.chart.clear();
      this.lines = [];
      return;
    }
    this.card.setMessage('');
    this.lines = meanOverHeads(series, run.numLayers, run.numHeads);
    const option = baseOption();
    option.legend = { type: 'scroll', right: 8, top: 'middle', orient: 'vertical', textStyle: { fontSize: 12 } };
    const grid = { left: 72, right: 150, top: 20, bottom: 52 };
    this.width = this.card.body.clientWidth;
    const width = Math.max(100, this.width - grid.left - grid.right);
    option.grid = grid;
    const scale = this.axes.scale(series.steps().map((s) => s.step));
    this.stepScale = scale;
    option.xAxis = scale.axis({ nameGap: 30 }, width);
    const extent = valueExtent(this.lines.flatMap(({ points }) => points.map((p) => p.value)), metricRange(METRIC));
    option.yAxis = valueAxis({
      name: 'attention entropy (nats), mean over heads', nameLocation: 'middle', nameGap: 50, ...extent,
    });
    option.series = this.lines.map(({ layer, points }) => ({
      type: 'line', name: `layer ${layer}`,
      data: points.map((p) => ({ value: [scale.x(p.step), p.value], stepText: p.stepText, heads: p.heads })),
      showSymbol: points.length <= 40, symbolSize: 5, lineStyle: { width: 2 },
      color: layerColor(layer, run.numLayers), emphasis: { focus: 'series' },
    }));
    addAlarmMarkers(option.series, 1, () => this.store.alarmsOf(METRIC), [{
      x: (s) => scale.x(s), xMin: scale.min, xMax: scale.max, yMax: extent.max, width,
    }]);
    option.tooltip = {
      ...option.tooltip, trigger: 'axis',
      formatter: (params) => {
        if (!params.length) return '';
        const rows = params.map((p) => `<tr><td>${p.marker}${p.seriesName}</td>` +
          `<td class="num">${exactValue(p.data.value[1])}</td></tr>`);
        return `<div class="tip"><b>step ${exactStep(params[0].data.stepText)}</b>` +
          ` · mean over ${params[0].data.heads} heads<table>${rows.join('')}</table></div>`;
      },
    };
    this.chart.setOption(option, { notMerge: true });
  }

  csv() {
    const rows = [];
    for (const { layer, points } of this.lines) {
      for (const p of points) rows.push([p.stepText, layer, exactValue(p.value), p.heads]);
    }
    return toCsv(['step', 'layer', 'mean_attn_entropy', 'heads_averaged'], rows);
  }

  summary() {
    return {
      series: this.lines.map(({ layer, points }) => ({ layer, points: points.length })),
      alarms: this.lines.length ? drawnAlarmMarkers(this.chart) : [],
      stepAxis: this.stepScale.kind,
    };
  }
}
