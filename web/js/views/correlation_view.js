// Per step, across the hidden states 0 … L: do the states whose mean drifts most
// (hidden_mean_norm) rank and move with the most anisotropic (hidden_anisotropy)? Spearman
// and Pearson p-values on a log axis with a dashed line at 0.05, beside ρ and r (Godey et
// al., Figure 5). Computed by the server (/api/v1/correlation).

import { api } from '../api.js';
import { createLoader } from '../card.js';
import { K_COLOR, Q_COLOR } from '../charts.js';
import { StepPanelsView } from './step_panels_view.js';

const ALPHA = 0.05;
const P_FLOOR = 1e-16;  // p = 0 (a perfect rank correlation) is drawn here on the log axis
const PANELS = [
  { key: 'p_value', title: 'two-sided p-value', yName: 'p (log scale)', log: true },
  { key: 'coefficient', title: 'Spearman ρ and Pearson r', yName: 'correlation' },
];
const TESTS = [
  { key: 'spearman', p: 'spearmanP', coefficient: 'spearmanRho', names: ['Spearman p', 'Spearman ρ'], color: Q_COLOR },
  { key: 'pearson', p: 'pearsonP', coefficient: 'pearsonR', names: ['Pearson p', 'Pearson r'], color: K_COLOR },
];

export class CorrelationView extends StepPanelsView {
  constructor(store, parent) {
    super(store, parent, {
      id: 'correlation', title: 'Mean norm vs anisotropy across layers, per step', subtitle: '',
      panels: PANELS, keyColumns: ['test'],
    });
    this.answer = null;
    this.loader = createLoader(this.card, (answer) => { this.answer = answer; this.render(); });
    store.follow(() => { this.answer = null; }, () => this.load());
  }

  load() {
    const run = this.store.run;
    if (!run) { this.render(); return; }
    this.loader(() => api.correlation({ run: run.name, probe_id: this.store.probeId }));
  }

  render() {
    const a = this.answer;
    const n = a && a.points && a.points.length ? `${a.points[0].hiddenStates} ` : '';
    const [x, y] = a ? [a.xMetric, a.yMetric] : ['hidden_mean_norm', 'hidden_anisotropy'];
    this.card.setSubtitle(`Correlation over the ${n}hidden states of ${x} with ${y} at each step ` +
      `(Spearman's ρ, Pearson's r); below the dashed line at p = ${ALPHA} the correlation is significant. ` +
      `p = 0 is drawn at ${P_FLOOR}.`);
    super.render();
  }

  emptyMessage() {
    return 'No correlation yet: it needs hidden_mean_norm and hidden_anisotropy of at least two hidden states.';
  }

  lines(panel) {
    const points = this.answer ? this.answer.points || [] : [];
    const isP = panel.key === 'p_value';
    return TESTS.map((test) => ({
      name: test.names[isP ? 0 : 1], key: [test.key], color: test.color,
      points: points.map((p) => {
        const exact = Number(p[isP ? test.p : test.coefficient]);
        const value = isP ? Math.max(exact, P_FLOOR) : exact;
        return { step: Number(p.step), stepText: String(p.step), exact, value };
      }).filter((p) => Number.isFinite(p.exact)),
    }));
  }

  references(panel) {
    return panel.key === 'p_value' ? [{ value: ALPHA, label: `p = ${ALPHA}` }] : [];
  }
}
