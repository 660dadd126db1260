// ECharts helpers shared by the views: the library import, colours (one per head, the same
// in every panel; one per layer along a sequential scale), step axes, and the
// small-multiples layout (one panel per layer).

import * as echarts from '../vendor/echarts.esm.min.js';
import { shortStep } from './format.js';

export { echarts };

// Tableau-like qualitative colours; heads past the list get evenly spaced hues.
const HEAD_COLORS = [
  '#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
  '#b07aa1', '#ff9da7', '#9c755f', '#79706e', '#17becf', '#bcbd22',
];

export function headColor(head) {
  if (head < HEAD_COLORS.length) return HEAD_COLORS[head];
  return `hsl(${(head * 137.5) % 360}, 55%, 48%)`;
}

// Viridis stops, for ordered things (layers, hidden states).
const VIRIDIS = ['#440154', '#482878', '#3e4989', '#31688e', '#26828e', '#1f9e89',
  '#35b779', '#6ece58', '#b5de2b', '#fde725'];

export function layerColor(index, count) {
  if (count <= 1) return VIRIDIS[3];
  const t = (index / (count - 1)) * 0.92 * (VIRIDIS.length - 1);  // short of pale yellow
  const i = Math.min(Math.floor(t), VIRIDIS.length - 2);
  const mix = (a, b, f) => Math.round(a + (b - a) * f);
  const rgb = (hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
  const [a, b] = [rgb(VIRIDIS[i]), rgb(VIRIDIS[i + 1])];
  return `rgb(${a.map((x, k) => mix(x, b[k], t - i)).join(',')})`;
}

export const VIRIDIS_STOPS = VIRIDIS;

export const TEXT = '#1f2933';
export const MUTED = '#616e7c';
export const GRID_LINE = '#e4e7eb';
const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

// A chart in `el` that follows the element's size.
export function createChart(el, onResize) {
  const chart = echarts.init(el, null, { renderer: 'canvas' });
  const observer = new ResizeObserver(() => {
    chart.resize();
    if (onResize) onResize();
  });
  observer.observe(el);
  return chart;
}

export function baseOption() {
  return {
    animation: false,
    textStyle: { fontFamily: FONT, color: TEXT },
    tooltip: {
      confine: true,
      backgroundColor: 'rgba(255,255,255,0.97)',
      borderColor: '#cbd2d9',
      textStyle: { color: TEXT, fontSize: 12 },
      extraCssText: 'box-shadow: 0 2px 8px rgba(0,0,0,0.15); border-radius: 6px;',
    },
  };
}

export function stepAxis(extra = {}) {
  return {
    type: 'value',
    name: 'training step',
    nameLocation: 'middle',
    nameGap: 24,
    nameTextStyle: { color: MUTED, fontSize: 11 },
    min: 'dataMin',
    max: 'dataMax',
    minInterval: 1,
    axisLabel: { formatter: (v) => shortStep(v), color: MUTED, fontSize: 10, hideOverlap: true },
    axisLine: { lineStyle: { color: '#9aa5b1' } },
    splitLine: { show: false },
    ...extra,
  };
}

export function valueAxis(extra = {}) {
  return {
    type: 'value',
    scale: true,
    nameTextStyle: { color: MUTED, fontSize: 11 },
    axisLabel: { color: MUTED, fontSize: 10 },
    splitLine: { lineStyle: { color: GRID_LINE } },
    ...extra,
  };
}

// Pixel boxes for `count` panels in `columns` columns inside a `width`-wide chart whose
// panels start `top` pixels down. Returns {grids, height}.
export function panelLayout({ count, width, top, panelHeight = 170, minPanelWidth = 260 }) {
  const columns = Math.max(1, Math.min(count, 4, Math.floor(width / minPanelWidth)));
  const rows = Math.ceil(count / columns);
  const gapX = 58;
  const gapY = 62;
  const left = 58;
  const right = 16;
  const cellWidth = (width - left - right - gapX * (columns - 1)) / columns;
  const grids = [];
  for (let i = 0; i < count; i++) {
    const row = Math.floor(i / columns);
    const col = i % columns;
    grids.push({
      left: left + col * (cellWidth + gapX),
      top: top + row * (panelHeight + gapY),
      width: cellWidth,
      height: panelHeight,
    });
  }
  return { grids, columns, rows, height: top + rows * (panelHeight + gapY) - gapY + 44 };
}
