// The dashboard's data: the chosen run and probe, every loaded metric series, the run's
// jobs and alarms, the isotropic baselines of its dimensions, and one polling round (poll)
// that extends them with since_step. Views subscribe to events and read from here; nothing
// else calls the series endpoint (views comparing runs ask runSeries).
//   'run'   the run or probe changed (caches were reset)
//   'data'  series changed: {metrics, newSteps}
//   'jobs'  the run's jobs changed
//   'alarms' the run's alarms changed (fired or resolved)
//   'error' the set of current error messages changed

import { api } from './api.js';
import { baselineDimension, baselineReference } from './format.js';

// One metric's points: key "layer:head" -> [{step, stepText, value}] in step order.
class MetricSeries {
  constructor(metric) {
    this.metric = metric;
    this.byKey = new Map();
    this.lastStep = null;  // BigInt: the largest step loaded
  }

  merge(points) {
    let added = 0;
    const touched = new Map();  // key -> Map stepText -> point, for the keys in `points`
    for (const p of points) {
      const key = `${p.layer}:${p.head}`;
      const stepText = String(p.step);
      const point = { step: Number(stepText), stepText, value: p.value, layer: p.layer, head: p.head };
      let bySteps = touched.get(key);
      if (!bySteps) {
        bySteps = new Map((this.byKey.get(key) || []).map((q) => [q.stepText, q]));
        touched.set(key, bySteps);
      }
      if (!bySteps.has(stepText)) added++;
      bySteps.set(stepText, point);
      const big = BigInt(stepText);
      if (this.lastStep === null || big > this.lastStep) this.lastStep = big;
    }
    for (const [key, bySteps] of touched) {
      this.byKey.set(key, [...bySteps.values()].sort((a, b) => a.step - b.step));
    }
    return added;
  }

  get(layer, head) {
    return this.byKey.get(`${layer}:${head}`) || [];
  }

  steps() {
    const steps = new Map();
    for (const list of this.byKey.values()) for (const p of list) steps.set(p.stepText, p.step);
    return [...steps.entries()].sort((a, b) => a[1] - b[1]).map(([text, step]) => ({ text, step }));
  }
}

export class Store {
  constructor() {
    this.runs = [];
    this.run = null;
    this.probeId = '';
    this.metrics = new Map();  // metric -> MetricSeries
    this.jobs = [];
    this.alarms = [];  // the run's alarms (the API's JSON), oldest change first
    this.alarmsKey = '';  // "id:revision,…" of this.alarms: what tells a change
    this.errors = new Map();  // source -> message
    this.listeners = new Map();
    this.pollCount = 0;
    this.lastPollAt = null;
    this.generation = 0;  // bumped on every run change; stale answers are dropped
    this.rewritten = new Set();  // "job:step" of steps a --force job has rewritten
    this.baselines = {};  // scope ('head', 'hidden') -> {dimension, cosineP95} of the run
    this.baselineCache = new Map();  // dimension -> promise of its answer
  }

  on(event, fn) {
    if (!this.listeners.has(event)) this.listeners.set(event, []);
    this.listeners.get(event).push(fn);
  }

  // For views that ask the server themselves: reset(run) then load() when the run or probe
  // changes, load() again when new steps arrive.
  follow(reset, load) {
    this.on('run', (run) => { reset(run); load(); });
    this.on('data', ({ newSteps }) => newSteps && load());
  }

  emit(event, detail) {
    for (const fn of this.listeners.get(event) || []) {
      try {
        fn(detail);
      } catch (err) {
        console.error(err);
        this.setError(`view:${event}`, `a view failed to draw: ${err.message}`);
      }
    }
  }

  setError(source, message) {
    const had = this.errors.get(source);
    if (message) this.errors.set(source, message);
    else this.errors.delete(source);
    if (had !== message) this.emit('error', [...this.errors.values()]);
  }

  // Runs the call; its failure becomes a page error under `source` instead of a throw.
  async guard(source, fn) {
    try {
      const result = await fn();
      this.setError(source, null);
      return result;
    } catch (err) {
      this.setError(source, err.message);
      return undefined;
    }
  }

  series(metric) {
    return this.metrics.get(metric) || new MetricSeries(metric);
  }

  async loadRuns() {
    const runs = await this.guard('runs', () => api.runs());
    if (runs) this.runs = runs;
    return this.runs;
  }

  async selectRun(name, probeId) {
    const run = this.runs.find((r) => r.name === name) || null;
    this.generation++;
    this.run = run;
    const probes = run ? run.probes || [] : [];
    this.probeId = probes.some((p) => p.id === probeId) ? probeId : probes[0] ? probes[0].id : '';
    this.metrics = new Map();
    this.jobs = [];
    this.alarms = [];
    this.alarmsKey = '';
    this.rewritten = new Set();
    this.baselines = {};
    this.emit('run', run);
    if (!run) return;
    // Jobs first: a step rewritten after this snapshot is then seen as new by poll().
    this.newlyRewritten(await this.refreshJobs());
    await this.refreshAlarms();
    await this.loadBaselines(run);
    await this.fetchMetrics([...this.wantedMetrics], false);
    this.lastPollAt = Date.now();
  }

  // The isotropic baseline (docs/metrics.md) in `dimension`: {dimension, cosineP95}, or
  // undefined when the server could not say (asked again next time).
  isotropicBaseline(dimension) {
    if (!this.baselineCache.has(dimension)) {
      const answer = this.guard('baseline', () => api.isotropicBaseline(dimension));
      this.baselineCache.set(dimension, answer);
      answer.then((a) => a || this.baselineCache.delete(dimension));
    }
    return this.baselineCache.get(dimension);
  }

  async loadBaselines(run) {
    const generation = this.generation;
    const [head, hidden] = await Promise.all(['head', 'hidden'].map(
      (scope) => this.isotropicBaseline(baselineDimension(run, scope))));
    if (generation === this.generation) this.baselines = { head, hidden };
  }

  // The dashed lines a view draws for `scope` ('head', 'hidden'; none for undefined):
  // [{value, label}], empty while the baseline is not known.
  baselineLines(scope) {
    const b = this.baselines[scope];
    return b ? [baselineReference(b)] : [];
  }

  // One metric of `run` (any stored run, not only the chosen one), for views comparing
  // runs: a MetricSeries holding (layer, head), from the probe with the chosen probe's id,
  // else the run's first. Rejects with the server's error.
  async runSeries(run, metric, layer, head) {
    const probes = (run.probes || []).map((p) => p.id);
    const probe = probes.includes(this.probeId) ? this.probeId : probes[0];
    const answer = await api.series({ run: run.name, probe_id: probe, metric, layer, head });
    const series = new MetricSeries(metric);
    series.merge(answer.points || []);
    return series;
  }

  // Metrics the views need; a view adds its own before the run is selected, or calls
  // ensureMetric later.
  wantedMetrics = new Set();

  async ensureMetric(metric) {
    this.wantedMetrics.add(metric);
    if (this.run && !this.metrics.has(metric)) await this.fetchMetrics([metric], false);
  }

  async fetchMetrics(metrics, incremental) {
    const generation = this.generation;
    const changed = [];
    let newSteps = false;
    await Promise.all(metrics.map(async (metric) => {
      const cached = this.metrics.get(metric);
      const since = incremental && cached && cached.lastStep !== null ? String(cached.lastStep) : undefined;
      const answer = await this.guard(`series:${metric}`, () => api.series({
        run: this.run.name, probe_id: this.probeId, metric, since_step: since,
      }));
      if (!answer || generation !== this.generation) return;
      const target = since ? cached : new MetricSeries(metric);
      const added = target.merge(answer.points || []);
      this.metrics.set(metric, target);
      if (!since || added > 0) changed.push(metric);
      if (added > 0) newSteps = true;
    }));
    if (changed.length && generation === this.generation) this.emit('data', { metrics: changed, newSteps });
  }

  async refreshJobs() {
    if (!this.run) return undefined;
    const generation = this.generation;
    const jobs = await this.guard('jobs', () => api.jobs(this.run.name));
    if (!jobs || generation !== this.generation) return undefined;
    this.jobs = jobs;
    this.emit('jobs', jobs);
    return jobs;
  }

  async refreshAlarms() {
    if (!this.run) return;
    const generation = this.generation;
    const alarms = await this.guard('alarms', () => api.alarms(this.run.name));
    if (!alarms || generation !== this.generation) return;
    const key = alarms.map((a) => `${a.id}:${a.revision}`).join();
    if (key === this.alarmsKey) return;
    this.alarms = alarms;
    this.alarmsKey = key;
    this.emit('alarms', alarms);
  }

  // The chosen run's alarms on `metric` (for the chosen probe), those of `layer` (and of
  // rules over every layer, layer -1) when given: what a chart of that metric marks.
  alarmsOf(metric, layer) {
    return this.alarms.filter((a) => a.metric === metric &&
      (!a.probeId || !this.probeId || a.probeId === this.probeId) &&
      (layer === undefined || a.layer === layer || a.layer === -1));
  }

  // The steps that --force jobs of `jobs` finished rewriting since the last call: their
  // values changed in place, which since_step cannot see.
  newlyRewritten(jobs) {
    const steps = [];
    for (const job of jobs || []) {
      if (!job.force) continue;
      for (const c of job.checkpoints || []) {
        if (c.state !== 'STEP_STATE_DONE' || (c.probeId && c.probeId !== this.probeId)) continue;
        const key = `${job.id}:${c.step}`;
        if (this.rewritten.has(key)) continue;
        this.rewritten.add(key);
        steps.push(BigInt(String(c.step)));
      }
    }
    return steps;
  }

  // One polling round: the run's stored steps, then only what is new.
  async poll() {
    if (!this.run) return;
    const generation = this.generation;
    const [runs, jobs] = await Promise.all([
      this.guard('runs', () => api.runs()), this.refreshJobs(), this.refreshAlarms()]);
    if (runs && generation === this.generation) {
      this.runs = runs;
      const run = runs.find((r) => r.name === this.run.name);
      // A step that appeared since the last round but is older than the newest one loaded
      // (an out-of-order or resumed job), or one a --force job rewrote, cannot arrive
      // through since_step: reload whole.
      const known = new Set((this.run.steps || []).map(String));
      const appeared = (run ? run.steps || [] : []).map(String).filter((s) => !known.has(s))
        .map((s) => BigInt(s));
      if (run) this.run = run;
      const rewritten = this.newlyRewritten(jobs);
      const stale = [...this.metrics.values()].filter((series) => series.lastStep !== null &&
          (appeared.some((s) => s < series.lastStep) || rewritten.some((s) => s <= series.lastStep)))
        .map((series) => series.metric);
      const fresh = [...this.wantedMetrics].filter((m) => !stale.includes(m));
      await Promise.all([this.fetchMetrics(stale, false), this.fetchMetrics(fresh, true)]);
    }
    this.pollCount++;
    this.lastPollAt = Date.now();
  }
}
