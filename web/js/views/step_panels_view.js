// The base of the views that plot values across training steps in panels side by side
// (one per metric or statistic), one line per hidden state, layer, head or run, with
// dashed reference lines (the isotropic baseline, thresholds), alarm markers and a legend on
// the right. The step axis is log or linear (step_axis.js, remembered per chart); each
// panel's value axis holds its data within the range of its metric (the catalogue's). A
// subclass says what is drawn: lines(panel), references(panel) and alarms(panel); it calls
// render() when its data changes.

import { createViewCard } from '../card.js';
import {
  addAlarmMarkers, addReferenceLines, baseOption, createChart, drawnAlarmMarkers, MUTED, panelLayout,
  valueAxis,
} from '../charts.js';
import { fileName } from '../download.js';
import { exactStep, exactValue, metricRange, shortValue, toCsv } from '../format.js';
import { createAxisChoices, StepScale, valueExtent } from '../step_axis.js';

const LEGEND_WIDTH = 190;

export class StepPanelsView {
  // panels: [{key (the CSV column), title, yName, log}]; keyColumns: the CSV columns that
  // name a line (a line's `key` holds their values); maxColumns, panelHeight: the layout.
  constructor(store, parent, { id, title, subtitle, panels, keyColumns, maxColumns = 4, panelHeight = 280 }) {
    this.store = store;
    this.id = id;
    this.panels = panels;
    this.keyColumns = keyColumns;
    this.layout = { maxColumns, panelHeight };
    this.drawn = [];  // [{panel, lines, references}] as last rendered
    this.card = createViewCard(parent, this, { id, title, subtitle });
    this.axes = createAxisChoices(this.card.controls, { id, onChange: () => this.render() });
    this.stepScale = new StepScale([], 'linear');
    this.card.body.classList.add('chart', 'chart-single');
    this.width = 0;
    this.chart = createChart(this.card.body, () => {
      if (Math.abs(this.card.body.clientWidth - this.width) > 4) this.render();
    });
  }

  fileBase() {
    return fileName(this.store.run && this.store.run.name, this.id);
  }

  // [{name, key: [values of keyColumns], color, points: [{step, stepText, value, exact}],
  // style, tip}]: `exact` (default `value`) is what tooltips and CSV show where the drawn
  // value differs (a clamped p-value, a stacked band); `style` is merged into the line
  // series; `tip` names the line in tooltips where it differs from the legend's `name`.
  lines() {
    return [];
  }

  // [{value, label}]: dashed horizontal lines across the panel.
  references() {
    return [];
  }

  // The alarms (the API's JSON) marked on the panel where they fired; none by default.
  alarms() {
    return [];
  }

  emptyMessage() {
    return 'No values stored for this run and probe yet.';
  }

  render() {
    const drawn = this.store.run ? this.panels.map((panel) => ({ panel, lines: this.lines(panel) })) : [];
    if (!drawn.some(({ lines }) => lines.some((l) => l.points.length))) {
      this.card.setMessage(this.store.run ? this.emptyMessage() : 'Choose a run.');
      this.chart.clear();
      this.drawn = [];
      return;
    }
    this.card.setMessage('');
    this.width = this.card.body.clientWidth;
    const layout = panelLayout({
      count: drawn.length, width: this.width - LEGEND_WIDTH, top: 40, left: 78, gapX: 96,
      minPanelWidth: 320, ...this.layout,
    });
    this.card.body.style.height = `${layout.height}px`;
    this.chart.resize();
    const previous = this.chart.getOption();
    const option = baseOption();
    option.legend = {
      type: 'scroll', orient: 'vertical', right: 8, top: 'middle', textStyle: { fontSize: 12 },
      selected: previous && previous.legend && previous.legend[0] ? previous.legend[0].selected : undefined,
    };
    option.title = drawn.map(({ panel }, i) => ({
      text: panel.title, left: layout.grids[i].left, top: layout.grids[i].top - 30,
      textStyle: { fontSize: 13, fontWeight: 600 },
    }));
    option.grid = layout.grids;
    const lastRow = (i) => Math.floor(i / layout.columns) === layout.rows - 1;
    const scale = this.axes.scale(drawn.flatMap(({ lines }) => lines.flatMap((l) => l.points.map((p) => p.step))));
    this.stepScale = scale;
    option.xAxis = drawn.map((d, i) => scale.axis({
      gridIndex: i, nameGap: 30, ...(lastRow(i) ? {} : { name: '' }),
    }, layout.grids[i].width));
    drawn.forEach((d) => { d.references = this.references(d.panel); });
    const yRanges = drawn.map(({ panel, lines, references }) => (panel.log ? {} : valueExtent([
      ...lines.flatMap((l) => l.points.map((p) => p.exact ?? p.value)), ...references.map((r) => r.value),
    ], metricRange(panel.key))));
    option.yAxis = drawn.map(({ panel }, i) => valueAxis({
      gridIndex: i, name: panel.yName, nameLocation: 'middle', nameGap: 56, ...yRanges[i],
      ...(panel.log ? { type: 'log', axisLabel: { formatter: shortValue, color: MUTED, fontSize: 10 } } : {}),
    }));
    option.series = [];
    this.seriesInfo = [];  // by series index: {panel, line}, none for reference lines
    drawn.forEach((d, i) => {
      for (const line of d.lines) {
        this.seriesInfo.push({ panel: d.panel, line });
        option.series.push({
          type: 'line', name: line.name, xAxisIndex: i, yAxisIndex: i, color: line.color,
          data: line.points.map((p) => ({ value: [scale.x(p.step), p.value], stepText: p.stepText, exact: p.exact })),
          showSymbol: line.points.length <= 40, symbolSize: 5, lineStyle: { width: 2 },
          emphasis: { focus: 'series' }, ...line.style,
        });
      }
    });
    addReferenceLines(option.series, drawn.length, (i) => drawn[i].references);
    addAlarmMarkers(option.series, drawn.length, (i) => this.alarms(drawn[i].panel), drawn.map((d, i) => ({
      x: (s) => scale.x(s), xMin: scale.min, xMax: scale.max, width: layout.grids[i].width,
      yMax: yRanges[i].max ?? (d.panel.log ? undefined : 1),
    })));
    option.tooltip = {
      ...option.tooltip, trigger: 'axis', formatter: (params) => this.tooltip(params),
    };
    this.chart.setOption(option, { notMerge: true });
    this.drawn = drawn;
  }

  tooltip(params) {
    const shown = params.filter((p) => this.seriesInfo[p.seriesIndex]);
    if (!shown.length) return '';
    const { panel } = this.seriesInfo[shown[0].seriesIndex];
    const rows = shown.map((p) => `<tr><td>${p.marker}${this.seriesInfo[p.seriesIndex].line.tip || p.seriesName}</td>` +
      `<td class="num">${exactValue(p.data.exact ?? p.data.value[1])}</td></tr>`);
    return `<div class="tip"><b>${panel.title}</b> · step ${exactStep(shown[0].data.stepText)}` +
      `<table>${rows.join('')}</table></div>`;
  }

  // One row per line key and step, one column per panel.
  csv() {
    const rows = new Map();
    this.drawn.forEach(({ lines }, i) => {
      for (const line of lines) {
        for (const p of line.points) {
          const id = JSON.stringify([...line.key, p.stepText]);
          if (!rows.has(id)) rows.set(id, [p.stepText, ...line.key, ...this.drawn.map(() => '')]);
          rows.get(id)[1 + line.key.length + i] = exactValue(p.exact ?? p.value);
        }
      }
    });
    return toCsv(['step', ...this.keyColumns, ...this.drawn.map(({ panel }) => panel.key)], [...rows.values()]);
  }

  // For tests: what is drawn, without reading pixels.
  summary() {
    return {
      panels: this.drawn.map(({ panel, references }) => ({ key: panel.key, references })),
      series: this.drawn.flatMap(({ panel, lines }) => lines.map((l) => ({
        panel: panel.key, name: l.name, points: l.points.length,
      }))),
      alarms: this.drawn.length ? drawnAlarmMarkers(this.chart)
        .map((m) => ({ ...m, panel: this.drawn[m.panel].panel.key })) : [],
      stepAxis: this.stepScale.kind,
    };
  }
}
