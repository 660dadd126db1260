// The axes of the charts across training steps: the step axis, log (step + 1) where a run's
// steps span more than two decades (Pythia's 0, 1, 2, 4, … 512, 1000, … 143000) and linear
// otherwise, labelled at the suite's own steps; value axes that hold the data, rounded to
// nice numbers and clamped to the metric's range (a cosine never past ±1); and the per-chart
// choices (step axis, a y range shared across layers) that the page remembers in
// localStorage.

import { createSelect } from './card.js';
import { MUTED } from './charts.js';
import { exactStep, shortStep } from './format.js';

// A run's steps span more than this many decades (largest / smallest non-zero step): log.
const LOG_DECADES = 2;

// 'log' or 'linear': the step axis that suits `steps` (numbers, any order).
export function autoStepAxis(steps) {
  const positive = steps.filter((s) => s > 0);
  if (positive.length < 2) return 'linear';
  const [lo, hi] = [Math.min(...positive), Math.max(...positive)];
  return Math.log10(hi / lo) > LOG_DECADES ? 'log' : 'linear';
}

// Powers of ten first, then 1…, 5…, 2… (what a reader anchors on), then the rest: the order
// in which steps claim a label.
function roundness(step) {
  let zeros = 0;
  for (let n = step; n >= 10 && n % 10 === 0; n /= 10) zeros++;
  const lead = Number(String(step)[0]);
  return zeros * 10 + ({ 1: 3, 5: 2, 2: 1 }[lead] || 0);
}

// A step a reader takes in at a glance: one significant digit (4, 30, 5000) or a power of
// two (16, 128, 512).
const plain = (step) => /^[1-9]0*$/.test(String(step)) || (step > 0 && (step & (step - 1)) === 0);

// The steps of a run on a chart's step axis: x(step) is where a step is drawn (the data's
// x), axis(extra, width) the ECharts axis for a plot `width` pixels wide, with a label (and
// tick) at as many of the steps as fit, the first and the last always.
export class StepScale {
  // steps: numbers; kind: 'log' or 'linear'.
  constructor(steps, kind) {
    this.kind = kind;
    this.log = kind === 'log';
    this.steps = [...new Set(steps)].sort((a, b) => a - b);
  }

  x(step) {
    return this.log ? Math.log10(Number(step) + 1) : Number(step);
  }

  // The step drawn at `x`, to the nearest integer.
  step(x) {
    return Math.round(this.log ? 10 ** x - 1 : x);
  }

  get min() { return this.steps.length ? this.x(this.steps[0]) : 0; }

  get max() { return this.steps.length ? this.x(this.steps[this.steps.length - 1]) : 1; }

  // The steps that get a label on a `width`-pixel axis, ascending: the first and the last,
  // then plain steps (roundest first) where they fit; any step where too few plain ones do.
  labelled(width, fontSize = 10) {
    const { steps } = this;
    if (steps.length <= 2) return steps;
    const span = this.max - this.min || 1;
    const at = (s) => ((this.x(s) - this.min) / span) * width;
    const half = (s) => (shortStep(s).length * fontSize * 0.62) / 2 + 7;  // half a label, and a gap
    const inner = steps.slice(1, -1).sort((a, b) => roundness(b) - roundness(a) || a - b);
    const pick = (candidates) => {
      const chosen = [steps[0], steps[steps.length - 1]];
      for (const s of candidates) {
        if (chosen.every((c) => Math.abs(at(c) - at(s)) >= half(c) + half(s))) chosen.push(s);
      }
      return chosen.sort((a, b) => a - b);
    };
    const round = pick(inner.filter(plain));
    return round.length >= Math.min(4, steps.length) ? round : pick(inner);
  }

  axis(extra = {}, width = 400) {
    const labelled = this.labelled(width);
    const text = new Map(labelled.map((s) => [this.x(s), shortStep(s)]));
    const values = labelled.map((s) => this.x(s));
    const single = this.steps.length < 2;
    return {
      type: 'value',
      name: this.log ? 'training step (log scale: step + 1)' : 'training step',
      nameLocation: 'middle',
      nameGap: 24,
      nameTextStyle: { color: MUTED, fontSize: 11 },
      min: single ? this.min - 1 : this.min,
      max: single ? this.max + 1 : this.max,
      axisLabel: {
        customValues: values, color: MUTED, fontSize: 10, hideOverlap: true,
        formatter: (v) => text.get(v) ?? shortStep(this.step(v)),
      },
      axisTick: { customValues: values, lineStyle: { color: '#9aa5b1' } },
      axisLine: { onZero: false, lineStyle: { color: '#9aa5b1' } },
      splitLine: { show: false },
      axisPointer: { label: { formatter: ({ value }) => exactStep(this.step(value)) } },
      ...extra,
    };
  }
}

// 1, 2, 2.5 or 5 times a power of ten, near x.
function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(x));
  const f = x / p;
  return (f < 1.5 ? 1 : f < 2.25 ? 2 : f < 3.5 ? 2.5 : f < 7.5 ? 5 : 10) * p;
}

const tidy = (x) => Number(x.toPrecision(12));

// {min, max, interval} of a value axis holding every finite number of `values`, padded and
// rounded out to nice numbers, then clamped to `range` ({min, max}, either absent); the
// range itself (else [0, 1]) when there is no number.
export function valueExtent(values, range = {}) {
  let [lo, hi] = [Infinity, -Infinity];
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo > hi) return { min: range.min ?? 0, max: range.max ?? (range.min ?? 0) + 1 };
  const span = hi - lo || Math.abs(hi) * 0.1 || 1;
  const interval = niceStep(span / 4);
  let min = tidy(Math.floor((lo - span * 0.04) / interval) * interval);
  let max = tidy(Math.ceil((hi + span * 0.04) / interval) * interval);
  if (range.min !== undefined && min < range.min) min = range.min;
  if (range.max !== undefined && max > range.max) max = range.max;
  if (min >= max) [min, max] = [range.min ?? lo - 1, range.max ?? hi + 1];
  return { min, max, interval };
}

// The choices of one chart, remembered per chart in localStorage: the step axis ('auto',
// 'log', 'linear') and, for charts of one panel per layer, whether the panels share one y
// range. Shows them as selects in `parent`; onChange runs when the user picks another.
const KEY = (id) => `anisoscope.axes.${id}`;

export function createAxisChoices(parent, { id, sharedY = false, onChange }) {
  let saved = {};
  try {
    saved = JSON.parse(window.localStorage.getItem(KEY(id)) || '{}') || {};
  } catch {
    saved = {};
  }
  const choices = {
    steps: ['auto', 'log', 'linear'].includes(saved.steps) ? saved.steps : 'auto',
    sharedY: sharedY ? saved.sharedY !== false : false,
  };
  const save = () => {
    try {
      window.localStorage.setItem(KEY(id), JSON.stringify({ steps: choices.steps, sharedY: choices.sharedY }));
    } catch {
      // Storage refused (a private window): the choice lasts until the page reloads.
    }
  };
  const stepOptions = (auto) => [['auto', `auto (${auto})`], ['log', 'log (step + 1)'], ['linear', 'linear']];
  const stepSelect = createSelect(parent, {
    label: 'steps', testid: `${id}-step-axis`, options: stepOptions('linear'), value: choices.steps,
    onChange: (v) => { choices.steps = v; save(); onChange(); },
  });
  if (sharedY) {
    createSelect(parent, {
      label: 'y range', testid: `${id}-y-range`,
      options: [['shared', 'shared across layers'], ['own', 'per layer']],
      value: choices.sharedY ? 'shared' : 'own',
      onChange: (v) => { choices.sharedY = v === 'shared'; save(); onChange(); },
    });
  }
  // The step scale of a chart of `steps` (numbers), as chosen; the auto choice is named.
  choices.scale = (steps) => {
    const auto = autoStepAxis(steps);
    stepSelect.set(stepOptions(auto), choices.steps);
    return new StepScale(steps, choices.steps === 'auto' ? auto : choices.steps);
  };
  return choices;
}
