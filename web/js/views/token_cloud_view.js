// Token clouds of one head at one step (Godey et al., Figure 11 and Appendix C): the
// sampled query and key vectors (the same probe positions at every step) projected by the
// server on the top two singular directions of the stored samples of every step (basis:
// Q and K together, Q only or K only). The axes span every step, so that moving the step
// slider compares like with like; equal scales on both axes.

import { api } from '../api.js';
import { createHeadPicker, createLoader, createSelect, createStepSlider, createViewCard } from '../card.js';
import { createChart, K_COLOR, originMarker, planeOption, Q_COLOR } from '../charts.js';
import { fileName } from '../download.js';
import { exactStep, exactValue, toCsv } from '../format.js';

const BASES = [['union', 'Q and K (union)'], ['q', 'Q only'], ['k', 'K only']];

export class TokenCloudView {
  constructor(store, parent) {
    this.store = store;
    this.basis = 'union';
    this.answer = null;
    this.shown = null;  // the step drawn
    this.card = createViewCard(parent, this, { id: 'token-cloud', title: 'Token clouds of one head' });
    this.picker = createHeadPicker(this.card.controls, { testid: 'token-cloud', onChange: () => this.load() });
    createSelect(this.card.controls, {
      label: 'basis', testid: 'token-cloud-basis', options: BASES, value: this.basis,
      onChange: (v) => { this.basis = v; this.load(); },
    });
    this.slider = createStepSlider(this.card.controls, { testid: 'token-cloud-step', onChange: () => this.draw() });
    this.card.body.classList.add('chart', 'chart-trajectory');
    this.chart = createChart(this.card.body, () => this.draw());
    this.loader = createLoader(this.card, (answer) => { this.answer = answer; this.draw(); });
    store.follow((run) => {
      this.picker.reset(run && run.numLayers, run && run.numHeads);
      this.slider.reset();
      this.answer = null;
    }, () => this.load());
  }

  fileBase() {
    const step = this.shown ? `step${this.shown.step}` : '';
    return fileName(this.store.run && this.store.run.name,
      `token_cloud_layer${this.picker.layer}_head${this.picker.head}_${this.basis}`, step);
  }

  load() {
    const run = this.store.run;
    if (!run) { this.answer = null; this.draw(); return; }
    this.loader(() => api.tokenCloud({
      run: run.name, probe_id: this.store.probeId, layer: this.picker.layer,
      head: this.picker.head, basis: this.basis,
    }));
  }

  draw() {
    const a = this.answer;
    const steps = a && a.steps ? a.steps : [];
    const index = this.slider.show(steps.map((s) => s.step));
    this.shown = index < 0 ? null : steps[index];
    if (!this.shown) {
      this.card.setMessage(this.store.run ? 'No token samples stored for this head yet.' : 'Choose a run.');
      this.card.setSubtitle('');
      this.chart.clear();
      return;
    }
    this.card.setMessage('');
    this.card.setSubtitle(`${a.tokenSamples} sampled tokens, as queries (Q) and as keys (K). ` +
      `Projection computed server-side: ${a.description}. The plane holds ` +
      `${(100 * a.explainedVariance).toFixed(1)}% of the stack's squared norm (explained variance).`);
    const option = planeOption(this.card.body, steps.flatMap((s) => [...s.qX, ...s.kX]),
      steps.flatMap((s) => [...s.qY, ...s.kY]));
    option.legend = { top: 4, left: 'center', data: ['Q (queries)', 'K (keys)'] };
    const cloud = (name, color, symbol, xs, ys) => ({
      type: 'scatter', name, color, symbol, symbolSize: 6, itemStyle: { opacity: 0.75 },
      data: xs.map((x, j) => ({ value: [x, ys[j]], token: j })),
    });
    const s = this.shown;
    option.series = [
      cloud('Q (queries)', Q_COLOR, 'circle', s.qX, s.qY),
      cloud('K (keys)', K_COLOR, 'diamond', s.kX, s.kY),
      originMarker(),
    ];
    option.tooltip = {
      ...option.tooltip, trigger: 'item',
      formatter: (p) => `<div class="tip"><b>${p.seriesName}</b>, sampled token ${p.data.token}` +
        ` · step ${exactStep(s.step)}<br>v1 = <span class="num">${exactValue(p.data.value[0])}</span><br>` +
        `v2 = <span class="num">${exactValue(p.data.value[1])}</span></div>`,
    };
    this.chart.setOption(option, { notMerge: true });
  }

  // The shown step's clouds: one row per sampled token.
  csv() {
    const s = this.shown;
    const rows = s ? s.qX.map((x, j) => [s.step, this.picker.layer, this.picker.head, this.basis, j,
      exactValue(x), exactValue(s.qY[j]), exactValue(s.kX[j]), exactValue(s.kY[j])]) : [];
    return toCsv(['step', 'layer', 'head', 'basis', 'token', 'q_x', 'q_y', 'k_x', 'k_y'], rows);
  }

  summary() {
    const a = this.answer;
    const s = this.shown;
    return {
      layer: this.picker.layer, head: this.picker.head, basis: a ? a.basis : null,
      steps: a && a.steps ? a.steps.length : 0, step: s ? s.step : null,
      tokens: a ? a.tokenSamples : 0, q: s ? s.qX.length : 0, k: s ? s.kX.length : 0,
      firstQ: s && s.qX.length ? [s.qX[0], s.qY[0]] : null,
      explainedVariance: a ? a.explainedVariance : null,
    };
  }
}
