// Singular value spectra of the hidden states at one step (Yan et al. 2022, Figure 1):
// σ_i / σ_1 against i, one curve per hidden state (0 = embeddings), on a log axis, with a
// step slider. A fast decay means the tokens share a few directions (token uniformity).

import { api } from '../api.js';
import { createLoader, createStepSlider, createViewCard } from '../card.js';
import { baseOption, createChart, layerColor, MUTED, valueAxis } from '../charts.js';
import { fileName } from '../download.js';
import { exactStep, exactValue, shortValue, toCsv } from '../format.js';
import { stateName } from './hidden_view.js';

export class SpectrumView {
  constructor(store, parent) {
    this.store = store;
    this.spectra = [];  // by hidden state: Map step text -> σ_i / σ_1
    this.steps = [];  // step texts, in order
    this.curves = [];  // as drawn: [{state, values}]
    this.card = createViewCard(parent, this, {
      id: 'spectrum',
      title: 'Singular value spectra of the hidden states',
      subtitle: 'σ_i / σ_1 of the uncentered matrix of each hidden state\'s token vectors, at one step; ' +
        'one curve per hidden state (0: embeddings, i: output of layer i−1). A fast decay means token uniformity.',
    });
    this.slider = createStepSlider(this.card.controls, { testid: 'spectrum-step', onChange: () => this.draw() });
    this.card.body.classList.add('chart', 'chart-single');
    this.chart = createChart(this.card.body);
    this.loader = createLoader(this.card, (spectra) => { this.setSpectra(spectra || []); this.draw(); });
    store.follow(() => { this.slider.reset(); this.setSpectra([]); }, () => this.load());
  }

  fileBase() {
    const step = this.shownStep();
    return fileName(this.store.run && this.store.run.name, 'hidden_spectrum', step && `step${step}`);
  }

  load() {
    const run = this.store.run;
    if (!run) { this.draw(); return; }
    const states = [...Array(run.numLayers + 1).keys()];
    this.loader(() => Promise.all(states.map((layer) => api.vectors({
      run: run.name, probe_id: this.store.probeId, kind: 'hidden_spectrum', layer,
    }).then((answer) => new Map((answer.points || []).map((p) => [String(p.step), p.values]))))));
  }

  setSpectra(spectra) {
    this.spectra = spectra;
    const steps = new Set(spectra.flatMap((byStep) => [...byStep.keys()]));
    this.steps = [...steps].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  }

  shownStep() {
    const index = this.slider.pick(this.steps.length);
    return index < 0 ? null : this.steps[index];
  }

  draw() {
    this.slider.show(this.steps);
    const step = this.shownStep();
    this.curves = step ? this.spectra.map((byStep, state) => ({ state, values: byStep.get(step) || [] })) : [];
    if (!this.curves.some((c) => c.values.length)) {
      this.card.setMessage(this.store.run ? 'No spectra stored for this run and probe yet.' : 'Choose a run.');
      this.chart.clear();
      return;
    }
    this.card.setMessage('');
    const option = baseOption();
    option.legend = { type: 'scroll', right: 8, top: 'middle', orient: 'vertical', textStyle: { fontSize: 12 } };
    option.grid = { left: 78, right: 210, top: 20, bottom: 52 };
    option.xAxis = valueAxis({
      name: 'i (singular value index)', nameLocation: 'middle', nameGap: 30, min: 1, max: 'dataMax',
      minInterval: 1, scale: false, splitLine: { show: false },
    });
    option.yAxis = valueAxis({
      type: 'log', name: 'σ_i / σ_1 (log scale)', nameLocation: 'middle', nameGap: 56,
      axisLabel: { formatter: shortValue, color: MUTED, fontSize: 10 },
    });
    const states = this.curves.length;
    // Zeros (a rank-deficient matrix) have no place on a log axis.
    option.series = this.curves.map(({ state, values }) => ({
      type: 'line', name: stateName(state), color: layerColor(state, states),
      data: values.map((v, i) => [i + 1, v]).filter(([, v]) => v > 0),
      showSymbol: values.length <= 40, symbolSize: 4, lineStyle: { width: 2 }, emphasis: { focus: 'series' },
    }));
    option.tooltip = {
      ...option.tooltip, trigger: 'axis',
      formatter: (params) => {
        if (!params.length) return '';
        const rows = params.map((p) => `<tr><td>${p.marker}${p.seriesName}</td>` +
          `<td class="num">${exactValue(p.data[1])}</td></tr>`);
        return `<div class="tip"><b>i = ${params[0].data[0]}</b> · step ${exactStep(step)}` +
          `<table>${rows.join('')}</table></div>`;
      },
    };
    this.chart.setOption(option, { notMerge: true });
  }

  // The shown step's spectra: one row per hidden state and index.
  csv() {
    const step = this.shownStep();
    const rows = this.curves.flatMap(({ state, values }) => values.map((v, i) => [step, state, i + 1, exactValue(v)]));
    return toCsv(['step', 'hidden_state', 'i', 'sigma_ratio'], rows);
  }

  summary() {
    return {
      step: this.shownStep(), steps: this.steps.length,
      curves: this.curves.map(({ state, values }) => ({ state, points: values.length, first: values[0] })),
    };
  }
}
