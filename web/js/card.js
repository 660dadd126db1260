// The frame every view sits in: a title, a one-line explanation, optional controls, the
// PNG/CSV download buttons, a message line (errors, empty states) and the chart area.

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
