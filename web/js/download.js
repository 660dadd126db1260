// Saving what a view shows: PNG from the chart's canvas, CSV from the view's data.

function save(filename, href) {
  const a = document.createElement('a');
  a.href = href;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

export function downloadCsv(filename, text) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv;charset=utf-8' }));
  save(filename, url);
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export function downloadPng(filename, chart) {
  save(filename, chart.getDataURL({ type: 'png', pixelRatio: 2, backgroundColor: '#ffffff' }));
}

// "bert-tiny_qk_mean_cosine.csv": safe for every file system.
export function fileName(...parts) {
  return parts.filter(Boolean).join('_').replace(/[^A-Za-z0-9._-]+/g, '-');
}
