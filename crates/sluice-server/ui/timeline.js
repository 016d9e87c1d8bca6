// One playground lane: a policy's decisions on the trace, drawn as SVG. Everything drawn
// comes from the server's decisions and the parameters the user chose; nothing here
// decides whether a request passes.

const NS = 'http://www.w3.org/2000/svg';
const WIDTH = 960;
const HEIGHT = 130;
const LEFT = 12;
const RIGHT = 12;
const LEVEL_TOP = 12;
const LEVEL_BOTTOM = 62;
const DOT_Y = 84;
const AXIS_Y = 106;

/** An SVG element with `attributes`, appended to `parent` when given. */
function svg(name, attributes = {}, parent = null) {
  const element = document.createElementNS(NS, name);
  for (const [key, value] of Object.entries(attributes)) {
    element.setAttribute(key, String(value));
  }
  if (parent) parent.append(element);
  return element;
}

/**
 * Draws a lane.
 * - `run`: the server's run of one policy ({name, algorithm, limit, decisions}).
 * - `spanMs`: the time the lane shows, from 0.
 * - `windowMs`: the window of window algorithms (null for buckets).
 * - `selected`: the index of the request whose window is drawn.
 * - `differ`: indexes of the requests another lane decided otherwise.
 * - `onAdd(ms)`, `onSelect(index)`: a click on the timeline, a click on a dot.
 */
export function drawLane({ run, title, spanMs, windowMs, selected, differ, onAdd, onSelect }) {
  const lane = document.createElement('div');
  lane.className = 'lane';
  lane.id = `lane-${run.name}`;
  lane.dataset.algorithm = run.algorithm;
  const heading = document.createElement('h3');
  const allowed = run.decisions.filter((decision) => decision.allowed).length;
  heading.textContent = title;
  const counts = document.createElement('small');
  counts.textContent = `${allowed} allowed · ${run.decisions.length - allowed} blocked · limit ${run.limit}`;
  heading.append(counts);
  const root = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': title });
  // Where time runs, for tests and tools: from 0 at plot-left to span-ms at plot-right.
  Object.assign(root.dataset, { spanMs: spanMs, plotLeft: LEFT, plotRight: WIDTH - RIGHT });
  const x = (ms) => LEFT + (ms / spanMs) * (WIDTH - LEFT - RIGHT);
  root.addEventListener('click', (event) => {
    const box = root.getBoundingClientRect();
    const at = ((event.clientX - box.left) / box.width) * WIDTH;
    onAdd(Math.max(0, ((at - LEFT) / (WIDTH - LEFT - RIGHT)) * spanMs));
  });
  drawDiffers(root, run, differ, x);
  drawWindows(root, run, windowMs, selected, spanMs, x);
  drawLevel(root, run, spanMs, x);
  drawAxis(root, spanMs, x);
  drawDots(root, run, selected, x, onSelect);
  lane.append(heading, root);
  return lane;
}

function drawDiffers(root, run, differ, x) {
  for (const index of differ) {
    const at = x(run.decisions[index].at_us / 1000);
    svg('rect', { class: 'differ', x: at - 6, y: LEVEL_TOP - 6, width: 12, height: AXIS_Y - LEVEL_TOP + 6 }, root);
  }
}

/**
 * Window algorithms: the window ending at the selected request (sliding), or the fixed
 * window it fell in (its end is the decision's reset time), over dashed window boundaries.
 */
function drawWindows(root, run, windowMs, selected, spanMs, x) {
  if (!windowMs) return;
  if (run.algorithm !== 'sliding_log') {
    for (let at = windowMs; at < spanMs; at += windowMs) {
      svg('line', { class: 'boundary', x1: x(at), x2: x(at), y1: LEVEL_TOP - 6, y2: AXIS_Y }, root);
    }
  }
  const decision = run.decisions[selected];
  if (!decision) return;
  const at = decision.at_us / 1000;
  let [from, to] = [at - windowMs, at];
  if (run.algorithm === 'fixed_window') {
    to = at + decision.reset_after_us / 1000;
    from = to - windowMs;
  }
  from = Math.max(0, from);
  const attributes = { class: 'window', x: x(from), y: LEVEL_TOP - 6, width: x(to) - x(from), height: AXIS_Y - LEVEL_TOP + 6 };
  svg('title', {}, svg('rect', attributes, root)).textContent = 'the window at the selected request';
}

/**
 * The remaining quota after each request (the decision's `remaining`), drawn back to full
 * at the decision's reset time, in a straight line when no request comes first.
 */
function drawLevel(root, run, spanMs, x) {
  const y = (remaining) => LEVEL_BOTTOM - (Math.min(remaining, run.limit) / run.limit) * (LEVEL_BOTTOM - LEVEL_TOP);
  const points = [[x(0), y(run.limit)]];
  run.decisions.forEach((decision, index) => {
    const at = decision.at_us / 1000;
    const next = index + 1 < run.decisions.length ? run.decisions[index + 1].at_us / 1000 : spanMs;
    points.push([x(at), points[points.length - 1][1]], [x(at), y(decision.remaining)]);
    const reset = decision.reset_after_us / 1000;
    if (reset <= 0) {
      points.push([x(next), y(decision.remaining)]);
    } else if (at + reset <= next) {
      points.push([x(at + reset), y(run.limit)], [x(next), y(run.limit)]);
    } else {
      const back = decision.remaining + ((run.limit - decision.remaining) * (next - at)) / reset;
      points.push([x(next), y(back)]);
    }
  });
  svg('polyline', { class: 'level', points: points.map((point) => point.join(',')).join(' ') }, root);
}

function drawAxis(root, spanMs, x) {
  svg('line', { class: 'axis', x1: x(0), x2: x(spanMs), y1: AXIS_Y, y2: AXIS_Y }, root);
  const step = niceStep(spanMs / 8);
  for (let at = 0; at <= spanMs; at += step) {
    svg('line', { class: 'axis', x1: x(at), x2: x(at), y1: AXIS_Y, y2: AXIS_Y + 4 }, root);
    const label = svg('text', { class: 'tick', x: x(at), y: AXIS_Y + 16, 'text-anchor': 'middle' }, root);
    label.textContent = at >= 1000 ? `${+(at / 1000).toFixed(2)} s` : `${at} ms`;
  }
}

/** A round step (1, 2 or 5 times a power of ten) near `rough`. */
function niceStep(rough) {
  const power = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
  return [1, 2, 5, 10].map((factor) => factor * power).find((step) => step >= rough) || power * 10;
}

function drawDots(root, run, selected, x, onSelect) {
  run.decisions.forEach((decision, index) => {
    const classes = ['dot', decision.allowed ? 'allowed' : 'blocked'];
    if (index === selected) classes.push('selected');
    const dot = svg('circle', { class: classes.join(' '), cx: x(decision.at_us / 1000), cy: DOT_Y, r: 7 }, root);
    dot.dataset.index = index;
    dot.dataset.allowed = decision.allowed;
    dot.addEventListener('click', (event) => {
      event.stopPropagation();
      onSelect(index);
    });
    svg('title', {}, dot).textContent = describe(decision);
  });
}

function describe(decision) {
  const at = `${decision.at_us / 1000} ms`;
  if (decision.allowed) return `${at}: allowed, ${decision.remaining} left`;
  if (decision.cost_exceeds_limit) return `${at}: blocked, the cost can never pass`;
  return `${at}: blocked, retry in ${decision.retry_after_us / 1000} ms`;
}
