// ECharts helpers shared by the views: the library import, colours (one per head, the same
// in every panel; one per layer along a sequential scale), the small-multiples layout (one
// panel per layer), dashed reference lines, alarm markers and equal-scale plane axes. The
// step axis and value ranges of charts across steps are in step_axis.js.

import * as echarts from '../vendor/echarts.esm.min.js';
import { shortStep, shortValue } from './format.js';

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
export function panelLayout({
  count, width, top, panelHeight = 170, minPanelWidth = 260, maxColumns = 4, left = 58, gapX = 58,
}) {
  const columns = Math.max(1, Math.min(count, maxColumns, Math.floor(width / minPanelWidth)));
  const rows = Math.ceil(count / columns);
  const gapY = 62;
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

const REFERENCE = '#52606d';

// A dashed horizontal line at y = `value` from x `from` to x `to` (the isotropic baseline, a
// threshold), named by `label` in the legend rather than on the plot, where a label would
// cover the curves: a series of its own, so that the value axis keeps it in view whatever
// the data; silent, and left out of tooltips.
function referenceLine({ value, label, from, to, axis = 0, color = REFERENCE }) {
  return {
    type: 'line', name: label, xAxisIndex: axis, yAxisIndex: axis,
    data: [[from, value], [to, value]], z: 1, silent: true, symbol: 'none', color,
    lineStyle: { type: 'dashed', width: 1.3, color }, tooltip: { show: false },
    emphasis: { disabled: true }, legendIcon: 'path://M0,4h5v2h-5zM7.5,4h5v2h-5zM15,4h5v2h-5z',
  };
}

// Appends to `series` (line series on step axes, data items {value: [x, value]}) the
// reference lines of each of the `panels` panels, refs(i) = [{value, label}], across the
// x the panel's series span. Returns the lines drawn, by panel; the series appended come
// after every series given, so that tooltip formatters can tell them apart.
export function addReferenceLines(series, panels, refs) {
  return [...Array(panels).keys()].map((i) => {
    const steps = series.filter((s) => (s.xAxisIndex || 0) === i).flatMap((s) => s.data.map((d) => d.value[0]));
    if (!steps.length) return [];
    const [from, to] = [steps.reduce((a, b) => Math.min(a, b)), steps.reduce((a, b) => Math.max(a, b))];
    const lines = refs(i);
    for (const ref of lines) series.push(referenceLine({ ...ref, from, to, axis: i }));
    return lines;
  });
}

// Lines and flags, then the (darker) label text, by severity; grey once resolved.
const ALARM_COLORS = { critical: '#c53030', warning: '#d69e2e' };
const ALARM_TEXT = { critical: '#9b2c2c', warning: '#8d5a0b' };
const RESOLVED_COLOR = '#7b8794';
const RESOLVED_TEXT = '#3e4c59';

// One marker per step and rule of `alarms` (the API's JSON; a rule firing on several layers
// at one step is one marker naming them): [{step, stepText, rule, layers, state, label}].
export function alarmMarkers(alarms) {
  const byStepRule = new Map();
  for (const a of alarms) {
    const key = `${a.step}|${a.rule}`;
    const marker = byStepRule.get(key) || {
      step: Number(a.step), stepText: String(a.step), rule: a.rule, layers: [], severity: a.severity,
      firing: false, resolvedSteps: [],
    };
    if (a.layer >= 0) marker.layers.push(a.layer);
    if (a.state === 'ALARM_STATE_FIRING') marker.firing = true;
    else if (a.resolvedStep !== undefined) marker.resolvedSteps.push(String(a.resolvedStep));
    byStepRule.set(key, marker);
  }
  return [...byStepRule.values()].map((m) => {
    const layers = m.layers.length ? ` · layer${m.layers.length > 1 ? 's' : ''} ${m.layers.sort((a, b) => a - b).join(', ')}` : '';
    const resolved = m.firing ? '' : ` · resolved at ${m.resolvedSteps.map(shortStep).join(', ')}`;
    return {
      step: m.step, stepText: m.stepText, rule: m.rule, layers: m.layers, severity: m.severity,
      state: m.firing ? 'firing' : 'resolved', label: `⚠ ${m.rule}${layers}${resolved}`,
    };
  });
}

// Appends to `series` one silent series per panel marking each step where an alarm of
// alarmsOf(i) fired: a vertical line through the panel and, at its top, a flag with the
// rule's label on a white ground, inside the plot (on the line's right, or its left in the
// right part of the panel). Red (critical) or amber (warning) while firing, grey once
// resolved; the legend's swatch is red or amber only while one is firing. `axes[i]` places
// panel i: {x(step): the data's x, xMin, xMax, yMax: the top of its value axis (none: a log
// axis, lines only), width: its pixels}. Returns the markers drawn, by panel; as with
// reference lines, the series come after every series given.
export function addAlarmMarkers(series, panels, alarmsOf, axes) {
  const byPanel = [...Array(panels).keys()].map((i) => alarmMarkers(alarmsOf(i)));
  const all = byPanel.flat();
  const firing = all.filter((m) => m.state === 'firing');
  const swatch = !firing.length ? RESOLVED_COLOR
    : ALARM_COLORS[firing.some((m) => m.severity === 'critical') ? 'critical' : 'warning'];
  byPanel.forEach((markers, i) => {
    if (!markers.length) return;
    const { x, xMin, xMax, yMax, width } = axes[i];
    const colors = (m) => (m.state === 'firing'
      ? [ALARM_COLORS[m.severity] || ALARM_COLORS.warning, ALARM_TEXT[m.severity] || ALARM_TEXT.warning]
      : [RESOLVED_COLOR, RESOLVED_TEXT]);
    // Labels in rows from the top, firing ones first, each in the first row where it covers
    // no other label.
    const span = (xMax - xMin) || 1;
    const room = Math.max(12, Math.floor((width * 0.6) / 6.6));  // characters that fit
    const rows = [];
    const order = (m) => (m.state === 'firing' ? (m.severity === 'critical' ? 0 : 1) : 2);
    const flags = [...markers].sort((a, b) => order(a) - order(b) || a.step - b.step).map((m) => {
      const at = ((x(m.step) - xMin) / span) * width;
      const right = at < width * 0.6;
      const text = m.label.length > room ? `${m.label.slice(0, room - 1)}…` : m.label;
      const size = text.length * 6.6 + 14;
      const [from, to] = right ? [at, at + size] : [at - size, at];
      let row = rows.findIndex((taken) => taken.every(([a, b]) => to + 4 < a || from > b + 4));
      if (row < 0) row = rows.push([]) - 1;
      rows[row].push([from, to]);
      return { m, right, text, row };
    });
    series.push({
      type: 'scatter', name: 'alarms', xAxisIndex: i, yAxisIndex: i, color: swatch, silent: true, z: 6,
      tooltip: { show: false }, symbol: 'triangle', symbolRotate: 180, symbolSize: 9, symbolOffset: [0, 5],
      data: yMax === undefined ? [] : flags.map(({ m, right, text, row }) => {
        const [line, ink] = colors(m);
        return {
          value: [x(m.step), yMax], itemStyle: { color: line },
          label: {
            show: true, formatter: text, position: right ? 'right' : 'left', offset: [0, 9 + row * 19],
            color: ink, fontSize: 11, fontWeight: 600, backgroundColor: 'rgba(255,255,255,0.92)',
            padding: [2, 4], borderRadius: 3, borderColor: line, borderWidth: 0.8,
          },
        };
      }),
      markLine: {
        silent: true, symbol: ['none', 'none'], animation: false, label: { show: false },
        data: markers.map((m) => ({
          xAxis: x(m.step), name: m.rule, stepText: m.stepText,
          lineStyle: { color: colors(m)[0], width: 1.8, type: m.state === 'firing' ? 'solid' : [4, 3] },
        })),
      },
    });
  });
  return byPanel;
}

// The alarm markers of a chart as its option holds them, for tests: [{panel, step, rule}].
export function drawnAlarmMarkers(chart) {
  const option = chart.getOption();
  return ((option && option.series) || []).filter((s) => s.markLine && s.name === 'alarms')
    .flatMap((s) => s.markLine.data.map((d) => ({ panel: s.xAxisIndex || 0, step: d.stepText, rule: d.name })));
}

// Query and key colours, in every view that shows both.
export const Q_COLOR = '#2b6cb0';
export const K_COLOR = '#dd6b20';

// Axis ranges holding the data, padded, with the same units per pixel on both axes.
function equalAspect(xMin, xMax, yMin, yMax, pixelRatio) {
  const cx = (xMin + xMax) / 2;
  const cy = (yMin + yMax) / 2;
  let sx = (xMax - xMin) * 1.15 || 1;
  let sy = (yMax - yMin) * 1.15 || 1;
  if (sx / sy < pixelRatio) sx = sy * pixelRatio;
  else sy = sx / pixelRatio;
  return [cx - sx / 2, cx + sx / 2, cy - sy / 2, cy + sy / 2];
}

// The option of a chart in `el` of points on the plane of two singular directions (v1
// across, v2 up): grid and axes holding the origin and every x of `xs` and y of `ys`, with
// the same scale on both axes.
export function planeOption(el, xs, ys) {
  const grid = { left: 80, right: 40, top: 40, bottom: 56 };
  const width = Math.max(100, el.clientWidth - grid.left - grid.right);
  const height = Math.max(100, el.clientHeight - grid.top - grid.bottom);
  const [lo, hi] = [(a) => a.reduce((m, v) => Math.min(m, v), 0), (a) => a.reduce((m, v) => Math.max(m, v), 0)];
  const [x0, x1, y0, y1] = equalAspect(lo(xs), hi(xs), lo(ys), hi(ys), width / height);
  const axis = (name, min, max, nameGap) => ({
    type: 'value', name, nameLocation: 'middle', nameGap, min, max,
    nameTextStyle: { color: MUTED },
    axisLabel: {
      formatter: (v) => shortValue(v), color: MUTED, fontSize: 10, hideOverlap: true,
      showMinLabel: false, showMaxLabel: false,
    },
    splitLine: { lineStyle: { color: '#eef0f2' } },
    axisLine: { onZero: false },
  });
  return {
    ...baseOption(), grid,
    xAxis: axis('v1: 1st singular direction', x0, x1, 30),
    yAxis: axis('v2: 2nd singular direction', y0, y1, 52),
  };
}

// A cross at the origin of a plane, labelled.
export function originMarker() {
  return {
    type: 'scatter', name: 'origin', symbol: 'path://M0,5L10,5M5,0L5,10', symbolSize: 10,
    itemStyle: { borderColor: '#52606d', borderWidth: 1.2, color: 'none' }, silent: true,
    data: [[0, 0]], label: { show: true, formatter: 'origin', position: 'bottom', fontSize: 10, color: MUTED },
  };
}
