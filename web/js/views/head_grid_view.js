// A per-head metric across steps as small multiples: ONE PANEL PER LAYER, one line per
// head, the same colour for a head in every panel (Godey et al., Figures 13 and 14); a
// cosine gets the isotropic baseline in d_head dimensions as a dashed line in every panel;
// an alarm on the metric is a vertical line in its layer's panel (every panel for a rule
// over all layers) at the step where it fired. The step axis is log or linear
// (step_axis.js) and the panels share one y range unless the user asks for one per layer;
// both choices are remembered.

import { createCard } from '../card.js';
import {
  addAlarmMarkers, addReferenceLines, baseOption, createChart, drawnAlarmMarkers, headColor, panelLayout,
  valueAxis, MUTED,
} from '../charts.js';
import { downloadCsv, downloadPng, fileName } from '../download.js';
import { BASELINE_SCOPE, exactStep, exactValue, metricRange, toCsv } from '../format.js';
import { createAxisChoices, StepScale, valueExtent } from '../step_axis.js';

export class HeadGridView {
  constructor(store, parent, { id, metric, title, subtitle, yName }) {
    this.store = store;
    this.id = id;
    this.metric = metric;
    this.yName = yName;
    this.card = createCard(parent, {
      id, title, subtitle,
      onPng: () => downloadPng(fileName(store.run && store.run.name, metric) + '.png', this.chart),
      onCsv: () => downloadCsv(fileName(store.run && store.run.name, metric) + '.csv', this.csv()),
    });
    this.axes = createAxisChoices(this.card.controls, { id, sharedY: true, onChange: () => this.render() });
    this.stepScale = new StepScale([], 'linear');
    this.yRanges = [];
    this.card.body.classList.add('chart', 'chart-grid');
    this.chart = createChart(this.card.body, () => this.onResize());
    this.width = 0;
    this.panels = 0;
    this.seriesInfo = [];
    this.references = [];
    store.wantedMetrics.add(metric);
    store.on('run', () => this.render());
    store.on('data', ({ metrics }) => metrics.includes(metric) && this.render());
    store.on('alarms', () => this.render());
  }

  onResize() {
    if (Math.abs(this.card.body.clientWidth - this.width) > 4) this.render();
  }

  render() {
    const run = this.store.run;
    const series = this.store.series(this.metric);
    const layers = run ? run.numLayers : 0;
    const heads = run ? run.numHeads : 0;
    if (!run || !layers || !heads || series.byKey.size === 0) {
      this.card.setMessage(run ? 'No values stored for this run and probe yet.' : 'Choose a run.');
      this.chart.clear();
      this.panels = 0;
      this.seriesInfo = [];
      return;
    }
    this.card.setMessage('');
    this.width = this.card.body.clientWidth;
    const layout = panelLayout({ count: layers, width: this.width, top: 58 });
    this.card.body.style.height = `${layout.height}px`;
    this.chart.resize();

    const previous = this.chart.getOption();
    const selected = previous && previous.legend && previous.legend[0] ? previous.legend[0].selected : undefined;
    const headNames = [...Array(heads).keys()].map((h) => `head ${h}`);
    const lastRow = (l) => Math.floor(l / layout.columns) === layout.rows - 1;
    const option = baseOption();
    option.legend = {
      type: 'scroll', top: 0, left: 'center', data: headNames, selected,
      itemWidth: 18, itemHeight: 10, textStyle: { fontSize: 12 },
    };
    option.title = layout.grids.map((g, l) => ({
      text: `layer ${l}`, left: g.left, top: g.top - 24,
      textStyle: { fontSize: 13, fontWeight: 600 },
    }));
    option.grid = layout.grids;
    const scale = this.axes.scale(series.steps().map((s) => s.step));
    this.stepScale = scale;
    option.xAxis = layout.grids.map((g, l) => scale.axis({ gridIndex: l, ...(lastRow(l) ? {} : { name: '' }) }, g.width));
    this.references = this.store.baselineLines(BASELINE_SCOPE[this.metric]);
    const range = metricRange(this.metric);
    const values = (l) => [...[...Array(heads).keys()].flatMap((h) => series.get(l, h).map((p) => p.value)),
      ...this.references.map((r) => r.value)];
    const shared = this.axes.sharedY ? valueExtent([...Array(layers).keys()].flatMap(values), range) : null;
    this.yRanges = layout.grids.map((g, l) => shared || valueExtent(values(l), range));
    option.yAxis = layout.grids.map((g, l) => valueAxis({
      gridIndex: l, ...this.yRanges[l],
      name: l % layout.columns === 0 ? this.yName : '',
      nameLocation: 'middle', nameGap: 40, nameTextStyle: { color: MUTED, fontSize: 11 },
    }));
    this.seriesInfo = [];
    option.series = [];
    for (let l = 0; l < layers; l++) {
      for (let h = 0; h < heads; h++) {
        const points = series.get(l, h);
        this.seriesInfo.push({ layer: l, head: h, points: points.length });
        option.series.push({
          type: 'line', name: `head ${h}`, xAxisIndex: l, yAxisIndex: l,
          data: points.map((p) => ({ value: [scale.x(p.step), p.value], stepText: p.stepText })),
          showSymbol: points.length <= 40, symbolSize: 4,
          lineStyle: { width: 1.6 }, color: headColor(h),
          emphasis: { focus: 'series' },
        });
      }
    }
    addReferenceLines(option.series, layers, () => this.references);
    const markers = addAlarmMarkers(option.series, layers, (l) => this.store.alarmsOf(this.metric, l),
      layout.grids.map((g, l) => ({
        x: (s) => scale.x(s), xMin: scale.min, xMax: scale.max, yMax: this.yRanges[l].max, width: g.width,
      })));
    option.legend.data = [...headNames, ...this.references.map((r) => r.label),
      ...(markers.some((m) => m.length) ? ['alarms'] : [])];
    option.tooltip = {
      ...option.tooltip,
      trigger: 'axis',
      axisPointer: { type: 'line', lineStyle: { color: '#9aa5b1' } },
      formatter: (params) => this.tooltip(params),
    };
    this.chart.setOption(option, { notMerge: true });
    this.panels = layout.grids.length;
  }

  tooltip(all) {
    const params = all.filter((p) => this.seriesInfo[p.seriesIndex]);
    if (!params.length) return '';
    const info = this.seriesInfo[params[0].seriesIndex];
    const rows = params.map((p) => {
      const s = this.seriesInfo[p.seriesIndex];
      return `<tr><td>${p.marker}head ${s.head}</td><td class="num">${exactValue(p.data.value[1])}</td></tr>`;
    });
    return `<div class="tip"><b>layer ${info.layer}</b> · step ${exactStep(params[0].data.stepText)}` +
      `<table>${rows.join('')}</table></div>`;
  }

  csv() {
    const rows = [];
    const run = this.store.run;
    if (run) {
      const series = this.store.series(this.metric);
      for (let l = 0; l < run.numLayers; l++) {
        for (let h = 0; h < run.numHeads; h++) {
          for (const p of series.get(l, h)) rows.push([p.stepText, l, h, exactValue(p.value)]);
        }
      }
    }
    return toCsv(['step', 'layer', 'head', this.metric], rows);
  }

  // For tests: what is drawn, without reading pixels.
  summary() {
    return {
      panels: this.panels, series: this.seriesInfo.map((s) => ({ ...s })), references: this.references,
      alarms: this.panels ? drawnAlarmMarkers(this.chart) : [],
      stepAxis: this.stepScale.kind, yRanges: this.panels ? this.yRanges : [],
    };
  }
}
