// The 2-D trajectory of one head's mean query Q̄ and mean key K̄ across steps (Godey et al.,
// Figure 12): both projected by the server on the top two singular directions of all that
// head's stored Q̄ and K̄ vectors; arrows follow step order. Equal scales on both axes.

import { api } from '../api.js';
import { createCard, createSelect } from '../card.js';
import { baseOption, createChart, MUTED } from '../charts.js';
import { downloadCsv, downloadPng, fileName } from '../download.js';
import { exactStep, exactValue, shortStep, shortValue, toCsv } from '../format.js';

const Q_COLOR = '#2b6cb0';
const K_COLOR = '#dd6b20';

export class TrajectoryView {
  constructor(store, parent) {
    this.store = store;
    this.layer = 0;
    this.head = 0;
    this.answer = null;
    this.request = 0;
    this.card = createCard(parent, {
      id: 'trajectory',
      title: 'Q̄ and K̄ trajectory of one head',
      subtitle: '',
      onPng: () => downloadPng(this.fileBase() + '.png', this.chart),
      onCsv: () => downloadCsv(this.fileBase() + '.csv', this.csv()),
    });
    this.layerSelect = createSelect(this.card.controls, {
      label: 'layer', testid: 'trajectory-layer', options: [],
      onChange: (v) => { this.layer = Number(v); this.load(); },
    });
    this.headSelect = createSelect(this.card.controls, {
      label: 'head', testid: 'trajectory-head', options: [],
      onChange: (v) => { this.head = Number(v); this.load(); },
    });
    this.card.body.classList.add('chart', 'chart-trajectory');
    this.chart = createChart(this.card.body, () => this.draw());
    store.on('run', (run) => {
      this.layer = 0;
      this.head = 0;
      const range = (n) => [...Array(n || 0).keys()].map((i) => [String(i), String(i)]);
      this.layerSelect.set(range(run && run.numLayers), 0);
      this.headSelect.set(range(run && run.numHeads), 0);
      this.answer = null;
      this.load();
    });
    store.on('data', ({ newSteps }) => newSteps && this.load());
  }

  fileBase() {
    return fileName(this.store.run && this.store.run.name, `trajectory_layer${this.layer}_head${this.head}`);
  }

  async load() {
    const run = this.store.run;
    if (!run) { this.answer = null; this.draw(); return; }
    const request = ++this.request;
    let answer = null;
    let error = '';
    try {
      answer = await api.trajectory({
        run: run.name, probe_id: this.store.probeId, layer: this.layer, head: this.head,
      });
    } catch (err) {
      error = err.message;
    }
    if (request !== this.request) return;
    this.answer = answer;
    this.draw();
    if (error) this.card.setMessage(error, 'error');
  }

  draw() {
    const a = this.answer;
    if (!a || !a.points || !a.points.length) {
      this.card.setMessage(this.store.run ? 'No Q̄/K̄ vectors stored for this head yet.' : 'Choose a run.');
      this.card.setSubtitle('');
      this.chart.clear();
      return;
    }
    this.card.setMessage('');
    const pct = (100 * a.explainedVariance).toFixed(1);
    this.card.setSubtitle(`Projection computed server-side: ${a.basis}. ` +
      `The plane holds ${pct}% of the stack's squared norm (explained variance).`);
    const pts = a.points.map((p) => ({ ...p, stepNum: Number(p.step) }));
    const xs = pts.flatMap((p) => [p.qX, p.kX, 0]);
    const ys = pts.flatMap((p) => [p.qY, p.kY, 0]);
    const grid = { left: 80, right: 40, top: 40, bottom: 56 };
    const width = Math.max(100, this.card.body.clientWidth - grid.left - grid.right);
    const height = Math.max(100, this.card.body.clientHeight - grid.top - grid.bottom);
    const [x0, x1, y0, y1] = equalAspect(Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys), width / height);
    const option = baseOption();
    option.grid = grid;
    option.legend = { top: 4, left: 'center', data: ['Q̄ (mean query)', 'K̄ (mean key)'] };
    const axis = (name, min, max) => ({
      type: 'value', name, nameLocation: 'middle', nameGap: name.startsWith('v1') ? 30 : 52,
      min, max, nameTextStyle: { color: MUTED },
      axisLabel: {
        formatter: (v) => shortValue(v), color: MUTED, fontSize: 10, hideOverlap: true,
        showMinLabel: false, showMaxLabel: false,
      },
      splitLine: { lineStyle: { color: '#eef0f2' } },
      axisLine: { onZero: false },
    });
    option.xAxis = axis('v1: 1st singular direction', x0, x1);
    option.yAxis = axis('v2: 2nd singular direction', y0, y1);
    const label = pts.length <= 30;
    const scatter = (name, color, symbol, get) => ({
      type: 'scatter', name, color, symbol, symbolSize: 9, z: 3,
      data: pts.map((p) => ({ value: get(p), step: p.step })),
      labelLayout: { hideOverlap: true },
      label: {
        show: label, position: 'top', fontSize: 10, color,
        formatter: (p) => shortStep(p.data.step),
      },
    });
    // The path, and an arrowhead at the middle of each segment (pointing to the later step).
    const arrows = (name, color, get) => [0, 1].map((half) => ({
      type: 'lines', name, coordinateSystem: 'cartesian2d', z: 2, silent: true,
      symbol: half ? ['none', 'arrow'] : 'none', symbolSize: 8,
      lineStyle: { color, width: half ? 0 : 1.6, opacity: 0.85 },
      data: pts.slice(1).map((p, i) => {
        const [a, b] = [get(pts[i]), get(p)];
        const end = half ? [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2] : b;
        return { coords: [a, end] };
      }),
    }));
    option.series = [
      ...arrows('Q̄ (mean query)', Q_COLOR, (p) => [p.qX, p.qY]),
      ...arrows('K̄ (mean key)', K_COLOR, (p) => [p.kX, p.kY]),
      scatter('Q̄ (mean query)', Q_COLOR, 'circle', (p) => [p.qX, p.qY]),
      scatter('K̄ (mean key)', K_COLOR, 'diamond', (p) => [p.kX, p.kY]),
      {
        type: 'scatter', name: 'origin', symbol: 'path://M0,5L10,5M5,0L5,10', symbolSize: 10,
        itemStyle: { borderColor: '#52606d', borderWidth: 1.2, color: 'none' }, silent: true,
        data: [[0, 0]], label: { show: true, formatter: 'origin', position: 'bottom', fontSize: 10, color: MUTED },
      },
    ];
    option.tooltip = {
      ...option.tooltip, trigger: 'item',
      formatter: (p) => `<div class="tip"><b>${p.seriesName}</b> · step ${exactStep(p.data.step)}<br>` +
        `v1 = <span class="num">${exactValue(p.data.value[0])}</span><br>` +
        `v2 = <span class="num">${exactValue(p.data.value[1])}</span></div>`,
    };
    this.chart.setOption(option, { notMerge: true });
  }

  csv() {
    const points = this.answer ? this.answer.points || [] : [];
    return toCsv(['step', 'layer', 'head', 'q_x', 'q_y', 'k_x', 'k_y'], points.map((p) =>
      [p.step, this.layer, this.head, exactValue(p.qX), exactValue(p.qY), exactValue(p.kX), exactValue(p.kY)]));
  }

  summary() {
    const a = this.answer;
    return {
      layer: this.layer, head: this.head, points: a && a.points ? a.points.length : 0,
      explainedVariance: a ? a.explainedVariance : null, basis: a ? a.basis : null,
    };
  }
}

// Axis ranges holding the data, padded, with the same units per pixel on both axes.
function equalAspect(xMin, xMax, yMin, yMax, pixelRatio) {
  let cx = (xMin + xMax) / 2;
  let cy = (yMin + yMax) / 2;
  let sx = (xMax - xMin) * 1.15 || 1;
  let sy = (yMax - yMin) * 1.15 || 1;
  if (sx / sy < pixelRatio) sx = sy * pixelRatio;
  else sy = sx / pixelRatio;
  return [cx - sx / 2, cx + sx / 2, cy - sy / 2, cy + sy / 2];
}
