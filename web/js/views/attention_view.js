// Attention sharpness and sinks across steps (Godey et al., Figures 9–10; Gu et al. 2024):
// the mean over queries of the largest, median and smallest attention probability, and of
// the weight on the first token, with a dashed line at 0.3 (a head above it is a sink
// head). Either every layer, as the mean over its heads, or every head of one layer.

import { createSelect, indexOptions } from '../card.js';
import { headColor, layerColor } from '../charts.js';
import { meanOverHeads } from './entropy_view.js';
import { StepPanelsView } from './step_panels_view.js';

const SINK = 0.3;
const PANELS = [
  { key: 'attn_max_prob', title: 'sharpness: max_j p_ij', yName: 'probability' },
  { key: 'attn_median_prob', title: 'median_j p_ij', yName: 'probability' },
  { key: 'attn_min_prob', title: 'min_j p_ij', yName: 'probability' },
  { key: 'attn_first_token_mass', title: 'sinks: first-token mass p_i0', yName: 'probability' },
];
const MEAN = 'mean';

export class AttentionView extends StepPanelsView {
  constructor(store, parent) {
    super(store, parent, {
      id: 'attention', title: 'Attention sharpness and sinks', subtitle: '',
      panels: PANELS, keyColumns: ['layer', 'head'], maxColumns: 2, panelHeight: 220,
    });
    this.mode = MEAN;  // MEAN, or the layer whose heads are shown
    this.modeSelect = createSelect(this.card.controls, {
      label: 'show', testid: 'attention-mode', options: [],
      onChange: (v) => { this.mode = v; this.render(); },
    });
    for (const { key } of PANELS) store.wantedMetrics.add(key);
    store.on('run', (run) => {
      this.mode = MEAN;
      this.modeSelect.set([[MEAN, 'every layer (mean over heads)'],
        ...indexOptions(run && run.numLayers).map(([v]) => [v, `heads of layer ${v}`])], MEAN);
      this.render();
    });
    store.on('data', ({ metrics }) => PANELS.some((p) => metrics.includes(p.key)) && this.render());
    store.on('alarms', () => this.render());
  }

  fileBase() {
    return `${super.fileBase()}_${this.mode === MEAN ? 'layer_means' : `layer${this.mode}`}`;
  }

  render() {
    this.card.setSubtitle(this.mode === MEAN
      ? 'Each line is one layer: the mean over its heads of the per-head value. Pick a layer to see its heads; ' +
        `a head whose first-token mass is above ${SINK} is a sink head.`
      : `Each line is one head of layer ${this.mode}; a head above ${SINK} on the first-token mass is a sink head.`);
    super.render();
  }

  lines(panel) {
    const run = this.store.run;
    const series = this.store.series(panel.key);
    if (this.mode === MEAN) {
      return meanOverHeads(series, run.numLayers, run.numHeads).map(({ layer, points }) => ({
        name: `layer ${layer}`, key: [layer, MEAN], color: layerColor(layer, run.numLayers), points,
      }));
    }
    const layer = Number(this.mode);
    return [...Array(run.numHeads).keys()].map((head) => ({
      name: `head ${head}`, key: [layer, head], color: headColor(head), points: series.get(layer, head),
    }));
  }

  // Every layer's alarms on the layer means; one layer's (and those over all layers) on its heads.
  alarms(panel) {
    return this.store.alarmsOf(panel.key, this.mode === MEAN ? undefined : Number(this.mode));
  }

  references(panel) {
    return panel.key === 'attn_first_token_mass' ? [{ value: SINK, label: `sink head > ${SINK}` }] : [];
  }

  summary() {
    return { ...super.summary(), mode: this.mode };
  }
}
