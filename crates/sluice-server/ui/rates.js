// The live view's chart: checks allowed and rejected in each of the last minutes' seconds
// (GET /v1/live's `per_second`), stacked, allowed below rejected.

import { niceStep, svg } from '/ui/timeline.js';

const WIDTH = 960;
const HEIGHT = 184;
const LEFT = 56;
const RIGHT = 10;
// Room above the plot for the last second's readout, so that no bar can run under it.
const TOP = 24;
const BOTTOM = 28;

/** Draws `counts` ({last, allowed, rejected}, one entry per second) into `container`. */
export function drawRates(container, counts) {
  const seconds = counts.allowed.length;
  const total = counts.allowed.map((allowed, index) => allowed + counts.rejected[index]);
  const peak = Math.max(0, ...total);
  const step = niceStep(Math.max(peak, 1) / 4);
  const max = Math.max(step, Math.ceil(peak / step) * step);
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const x = (index) => LEFT + (index / seconds) * plotW;
  const y = (value) => TOP + plotH - (value / max) * plotH;
  const root = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': 'checks per second' });
  const sum = (values) => values.reduce((all, value) => all + value, 0);
  Object.assign(root.dataset, {
    seconds,
    peak,
    max,
    busySeconds: total.filter((count) => count > 0).length,
    allowedTotal: sum(counts.allowed),
    rejectedTotal: sum(counts.rejected),
  });
  svg('rect', { class: 'plot', x: LEFT, y: TOP, width: plotW, height: plotH }, root);
  for (let value = 0; value <= max; value += step) {
    svg('line', { class: 'grid', x1: LEFT, x2: LEFT + plotW, y1: y(value), y2: y(value) }, root);
    const label = svg('text', { class: 'tick ytick', x: LEFT - 6, y: y(value) + 3.5, 'text-anchor': 'end' }, root);
    label.textContent = String(value);
  }
  const title = svg('text', { class: 'tick', transform: `translate(12 ${TOP + plotH / 2}) rotate(-90)`, 'text-anchor': 'middle' }, root);
  title.textContent = 'checks / s';
  svg('path', { class: 'rate-rejected', d: outline(total, x, y, TOP + plotH) }, root);
  svg('path', { class: 'rate-allowed', d: outline(counts.allowed, x, y, TOP + plotH) }, root);
  for (let ago = 0; ago <= seconds; ago += 60) {
    const at = x(seconds - ago);
    svg('line', { class: 'axis', x1: at, x2: at, y1: TOP + plotH, y2: TOP + plotH + 4 }, root);
    const anchor = ago === 0 ? 'end' : ago === seconds ? 'start' : 'middle';
    const label = svg('text', { class: 'tick xtick', x: at, y: TOP + plotH + 16, 'text-anchor': anchor }, root);
    label.textContent = ago === 0 ? 'now' : `${ago / 60} min ago`;
  }
  const last = seconds - 1;
  const readout = svg('text', { class: 'tick readout', x: LEFT + plotW, y: TOP - 8, 'text-anchor': 'end' }, root);
  readout.textContent = seconds ? `last second: ${counts.allowed[last]} allowed, ${counts.rejected[last]} rejected` : '';
  container.replaceChildren(root);
}

/** A filled step outline of `values` (one per second) down to `base`: no seams between seconds. */
function outline(values, x, y, base) {
  let path = `M${x(0)},${base}`;
  values.forEach((value, index) => {
    path += `V${y(value).toFixed(2)}H${x(index + 1).toFixed(2)}`;
  });
  return `${path}V${base}Z`;
}
