// Metrics with one value per hidden state (0 = embedding output, L = last layer) or per
// block (0 … L−1) across steps: panels side by side, one line per hidden state or block,
// with the isotropic baseline on the panels of cosines and the run's alarms on each metric.

import { layerColor } from '../charts.js';
import { BASELINE_SCOPE } from '../format.js';
import { StepPanelsView } from './step_panels_view.js';

export const stateName = (index) => (index === 0 ? 'embeddings (0)' : `after layer ${index - 1} (${index})`);

export class HiddenView extends StepPanelsView {
  // panels: [{key: the metric, title, yName}]; perBlock: the metrics are per block.
  constructor(store, parent, { panels, perBlock = false, ...options }) {
    super(store, parent, { panels, keyColumns: [perBlock ? 'layer' : 'hidden_state'], ...options });
    this.perBlock = perBlock;
    for (const { key } of panels) store.wantedMetrics.add(key);
    store.on('run', () => this.render());
    store.on('data', ({ metrics }) => panels.some((p) => metrics.includes(p.key)) && this.render());
    store.on('alarms', () => this.render());
  }

  emptyMessage() {
    return `No ${this.perBlock ? 'per-layer' : 'hidden-state'} metrics stored for this run and probe yet.`;
  }

  lines(panel) {
    const run = this.store.run;
    const count = this.perBlock ? run.numLayers : run.numLayers + 1;
    const series = this.store.series(panel.key);
    return [...Array(count).keys()].map((i) => ({
      name: this.perBlock ? `layer ${i}` : stateName(i), key: [i],
      color: layerColor(i, count), points: series.get(i, -1),
    }));
  }

  alarms(panel) {
    return this.store.alarmsOf(panel.key);
  }

  references(panel) {
    return this.store.baselineLines(BASELINE_SCOPE[panel.key]);
  }
}
