// One playground lane: a policy's decisions on the trace, drawn as SVG. Everything drawn
// comes from the server's decisions and the parameters the user chose; nothing here
// decides whether a request passes.

const NS = 'http://www.w3.org/2000/svg';
const WIDTH = 960;
const HEIGHT = 150;
const LEFT = 48;
const RIGHT = 12;
const LEVEL_TOP = 14;
const LEVEL_BOTTOM = 76;
const DOT_Y = 100;
const AXIS_Y = 124;

/** An SVG element with `attributes`, appended to `parent` when given (the live view's chart uses it too). */
export function svg(name, attributes = {}, parent = null) {
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
  drawWindows(root, run, windowMs, selected, spanMs, x);
  // Over the translucent window box, and opaque: one colour inside the box and out.
  drawDiffers(root, run, differ, x);
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
 * The remaining quota as the server's peeks answered it (`run.level`): each point holds
 * until the next, so the line steps exactly where the algorithm gave quota back (a
 * refill, a window's reset, a logged request's expiry), with its scale on the left.
 */
function drawLevel(root, run, spanMs, x) {
  const top = Math.max(run.limit, ...run.level.map((point) => point.remaining), 1);
  const y = (remaining) => LEVEL_BOTTOM - (remaining / top) * (LEVEL_BOTTOM - LEVEL_TOP);
  drawLevelAxis(root, top, y);
  const points = [];
  run.level.forEach(({ at_us: atUs, remaining }, index) => {
    const at = atUs / 1000;
    const next = run.level[index + 1];
    // Of several points at one instant past the start (quota given back just as a request
    // takes it), the last is what holds: drawing each would leave a needle.
    if (at > spanMs || (index > 0 && next && next.at_us === atUs)) return;
    if (points.length) points.push([x(at), points[points.length - 1][1]]);
    points.push([x(at), y(remaining)]);
  });
  if (points.length) points.push([x(spanMs), points[points.length - 1][1]]);
  const line = svg('polyline', { class: 'level', points: points.map((point) => point.join(',')).join(' ') }, root);
  // The steps as data, for tests and tools: [ms, remaining] from each point on.
  line.dataset.steps = JSON.stringify(run.level.map((point) => [point.at_us / 1000, point.remaining]));
}

/** The quota's scale: 0, the limit, and round values between when there is room. */
function drawLevelAxis(root, top, y) {
  svg('line', { class: 'axis', x1: LEFT, x2: LEFT, y1: LEVEL_TOP, y2: LEVEL_BOTTOM }, root);
  const step = niceStep(top / 3);
  const values = [];
  for (let value = 0; value < top - step / 2; value += step) values.push(value);
  values.push(top);
  for (const value of values) {
    svg('line', { class: 'guide', x1: LEFT, x2: WIDTH - RIGHT, y1: y(value), y2: y(value) }, root);
    const label = svg('text', { class: 'tick level-tick', x: LEFT - 5, y: y(value) + 3.5, 'text-anchor': 'end' }, root);
    label.textContent = String(value);
  }
  const title = svg('text', { class: 'tick', transform: `translate(11 ${(LEVEL_TOP + LEVEL_BOTTOM) / 2}) rotate(-90)`, 'text-anchor': 'middle' }, root);
  title.textContent = 'quota left';
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

/** A round step (1, 2 or 5 times a power of ten) of at least `rough`, and at least 1. */
export function niceStep(rough) {
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
