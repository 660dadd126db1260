// The frame every view sits in: a title, a one-line explanation, optional controls, the
// PNG/CSV download buttons, a message line (errors, empty states) and the chart area; and
// the controls views share (selects, a step slider, layer/head pickers) and a loader for
// views that ask the server themselves.

import { downloadCsv, downloadPng } from './download.js';
import { exactStep } from './format.js';

export function createCard(parent, { id, title, subtitle, onPng, onCsv }) {
  const root = document.createElement('section');
  root.className = 'card';
  root.id = `view-${id}`;
  root.dataset.testid = `view-${id}`;
  root.innerHTML = `
    <header class="card-head">
      <div class="card-titles">
        <h2></h2>
        <p class="card-subtitle"></p>
      </div>
      <div class="card-controls"></div>
      <div class="card-actions">
        <button type="button" class="btn" data-testid="${id}-png" title="Download the chart as PNG">PNG</button>
        <button type="button" class="btn" data-testid="${id}-csv" title="Download the data as CSV">CSV</button>
      </div>
    </header>
    <p class="card-message" hidden></p>
    <div class="card-body"></div>`;
  root.querySelector('h2').textContent = title;
  root.querySelector('.card-subtitle').textContent = subtitle;
  root.querySelector(`[data-testid="${id}-png"]`).addEventListener('click', onPng);
  root.querySelector(`[data-testid="${id}-csv"]`).addEventListener('click', onCsv);
  parent.appendChild(root);
  const message = root.querySelector('.card-message');
  return {
    root,
    body: root.querySelector('.card-body'),
    controls: root.querySelector('.card-controls'),
    setSubtitle: (text) => { root.querySelector('.card-subtitle').textContent = text; },
    // kind: 'info' or 'error'; an empty text hides the line.
    setMessage(text, kind = 'info') {
      message.hidden = !text;
      message.textContent = text || '';
      message.className = `card-message ${kind}`;
    },
  };
}

// The card of `view`: its PNG and CSV buttons save view.chart and view.csv() under the
// name view.fileBase() gives at the time of the click.
export function createViewCard(parent, view, { id, title, subtitle = '' }) {
  return createCard(parent, {
    id, title, subtitle,
    onPng: () => downloadPng(`${view.fileBase()}.png`, view.chart),
    onCsv: () => downloadCsv(`${view.fileBase()}.csv`, view.csv()),
  });
}

// A labelled <select>; options are [value, label] pairs.
export function createSelect(parent, { label, testid, options, value, onChange }) {
  const wrap = document.createElement('label');
  wrap.className = 'control';
  wrap.innerHTML = '<span></span><select></select>';
  wrap.querySelector('span').textContent = label;
  const select = wrap.querySelector('select');
  select.dataset.testid = testid;
  const set = (opts, selected) => {
    select.replaceChildren(...opts.map(([v, text]) => new Option(text, v)));
    if (selected !== undefined) select.value = String(selected);
  };
  set(options, value);
  select.addEventListener('change', () => onChange(select.value));
  parent.appendChild(wrap);
  return { select, set, wrap };
}

// [["0", "0"], ["1", "1"], …]: options for indices 0 … n−1.
export const indexOptions = (n) => [...Array(n || 0).keys()].map((i) => [String(i), String(i)]);

// Layer and head selects for a view of one head (or one layer, with heads = 0: the head
// select is hidden). reset(layers, heads) fills them and picks 0, 0; onChange runs when
// the user picks another.
export function createHeadPicker(parent, { testid, onChange }) {
  const picker = { layer: 0, head: 0 };
  const layer = createSelect(parent, {
    label: 'layer', testid: `${testid}-layer`, options: [],
    onChange: (v) => { picker.layer = Number(v); onChange(); },
  });
  const head = createSelect(parent, {
    label: 'head', testid: `${testid}-head`, options: [],
    onChange: (v) => { picker.head = Number(v); onChange(); },
  });
  picker.reset = (layers, heads) => {
    picker.layer = 0;
    picker.head = 0;
    layer.set(indexOptions(layers), 0);
    head.set(indexOptions(heads), 0);
    head.wrap.hidden = !heads;
  };
  return picker;
}

// A step slider with its label. The thumb follows the latest step until the user picks
// another. pick(count) is the index shown out of `count` steps (−1 for none); show(steps)
// takes the step texts in order, moves the thumb there and returns that index.
export function createStepSlider(parent, { testid, onChange }) {
  const wrap = document.createElement('label');
  wrap.className = 'control slider';
  wrap.innerHTML = '<span>step</span><input type="range" min="0" max="0" value="0"><output></output>';
  const input = wrap.querySelector('input');
  const output = wrap.querySelector('output');
  input.dataset.testid = testid;
  output.dataset.testid = `${testid}-label`;
  parent.appendChild(wrap);
  let picked = -1;  // -1: follow the latest step
  input.addEventListener('input', () => {
    picked = Number(input.value) === Number(input.max) ? -1 : Number(input.value);
    onChange();
  });
  const slider = {
    reset: () => { picked = -1; },
    pick: (count) => (count ? (picked < 0 || picked >= count ? count - 1 : picked) : -1),
    show(steps) {
      const index = slider.pick(steps.length);
      input.max = String(Math.max(0, steps.length - 1));
      input.disabled = steps.length < 2;
      input.value = String(Math.max(0, index));
      output.textContent = index < 0 ? '' : `${exactStep(steps[index])}  (${index + 1} of ${steps.length})`;
      return index;
    },
  };
  return slider;
}

// For views that ask the server themselves: load(fetch) awaits fetch() and hands the
// answer (null on failure) to draw, unless a later load started meanwhile; a failure is
// then shown on the card.
export function createLoader(card, draw) {
  let latest = 0;
  return async (fetch) => {
    const request = ++latest;
    let answer = null;
    let error = '';
    try {
      answer = await fetch();
    } catch (err) {
      error = err.message;
    }
    if (request !== latest) return;
    draw(answer);
    if (error) card.setMessage(error, 'error');
  };
}
