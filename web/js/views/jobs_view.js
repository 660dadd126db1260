// The run's queued and running jobs with a progress bar each (a remote series' job also names
// its source, the revisions its workers run and each download's bytes, rate and cache size);
// when none is active, one line about the most recent job.

import { describeFetch, describeSource, enumName } from '../format.js';

export class JobsView {
  constructor(store, el) {
    this.store = store;
    this.el = el;
    store.on('run', () => this.render());
    store.on('jobs', () => this.render());
  }

  render() {
    const jobs = this.store.jobs || [];
    const active = jobs.filter((j) => j.state === 'JOB_STATE_QUEUED' || j.state === 'JOB_STATE_RUNNING');
    this.el.replaceChildren();
    if (!this.store.run) return;
    if (!active.length) {
      const last = jobs[0];
      const line = document.createElement('div');
      line.className = 'job idle';
      line.dataset.testid = 'job-idle';
      line.textContent = last
        ? `No job running · last job #${last.id} ${enumName(last.state, 'JOB_STATE_')} (${last.stepsFinished}/${last.stepsTotal} steps)`
        : 'No jobs for this run';
      this.el.appendChild(line);
      return;
    }
    for (const job of active) {
      const total = job.stepsTotal || 0;
      const done = job.stepsFinished || 0;
      const row = document.createElement('div');
      row.className = 'job';
      row.dataset.testid = 'job-active';
      row.dataset.jobId = job.id;
      row.innerHTML = '<span class="job-label"></span><progress></progress><span class="job-count"></span>';
      // A remote series: its source, and the revision of each step running (downloading or
      // computing) on a worker.
      const source = describeSource(job.source);
      const running = (job.checkpoints || []).filter((c) => c.state === 'STEP_STATE_RUNNING' && c.revision);
      const where = source ? ` · ${source}` + (running.length
        ? ` @ ${running.map((c) => c.revision).join(', ')}` : '') : '';
      row.querySelector('.job-label').textContent = `job #${job.id} ${enumName(job.state, 'JOB_STATE_')}${where}`;
      const bar = row.querySelector('progress');
      bar.max = Math.max(1, total);
      bar.value = done;
      row.querySelector('.job-count').textContent = `${done}/${total} steps`;
      this.el.appendChild(row);
      // Its steps downloading now: bytes so far, the rate and the worker's cache.
      for (const checkpoint of running.filter((c) => c.fetch)) {
        const line = document.createElement('div');
        line.className = 'job fetch';
        line.dataset.testid = 'job-fetch';
        line.textContent = describeFetch(checkpoint);
        this.el.appendChild(line);
      }
    }
  }

  summary() {
    return (this.store.jobs || []).map((j) => ({
      id: j.id, state: j.state, stepsFinished: j.stepsFinished, stepsTotal: j.stepsTotal,
      source: describeSource(j.source),
    }));
  }
}
