// The 2-D trajectory of one head's mean query Q̄ and mean key K̄ across steps (Godey et al.,
// Figure 12): both projected by the server on the top two singular directions of all that
// head's stored Q̄ and K̄ vectors; arrows follow step order. Equal scales on both axes.

import { api } from '../api.js';
import { createHeadPicker, createLoader, createViewCard } from '../card.js';
import { createChart, K_COLOR, originMarker, planeOption, Q_COLOR } from '../charts.js';
import { fileName } from '../download.js';
import { exactStep, exactValue, shortStep, toCsv } from '../format.js';

export class TrajectoryView {
  constructor(store, parent) {
    this.store = store;
    this.answer = null;
    this.card = createViewCard(parent, this, { id: 'trajectory', title: 'Q̄ and K̄ trajectory of one head' });
    this.picker = createHeadPicker(this.card.controls, { testid: 'trajectory', onChange: () => this.load() });
    this.card.body.classList.add('chart', 'chart-trajectory');
    this.chart = createChart(this.card.body, () => this.draw());
    this.loader = createLoader(this.card, (answer) => { this.answer = answer; this.draw(); });
    store.follow((run) => {
      this.picker.reset(run && run.numLayers, run && run.numHeads);
      this.answer = null;
    }, () => this.load());
  }

  get layer() { return this.picker.layer; }

  get head() { return this.picker.head; }

  fileBase() {
    return fileName(this.store.run && this.store.run.name, `trajectory_layer${this.layer}_head${this.head}`);
  }

  load() {
    const run = this.store.run;
    if (!run) { this.answer = null; this.draw(); return; }
    this.loader(() => api.trajectory({
      run: run.name, probe_id: this.store.probeId, layer: this.layer, head: this.head,
    }));
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
    const option = planeOption(this.card.body, pts.flatMap((p) => [p.qX, p.kX]), pts.flatMap((p) => [p.qY, p.kY]));
    option.legend = { top: 4, left: 'center', data: ['Q̄ (mean query)', 'K̄ (mean key)'] };
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
      originMarker(),
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
