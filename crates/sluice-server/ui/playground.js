// The playground: a stream of requests the user builds, decided by the server's real
// algorithms (POST /v1/playground, on a throwaway store) and drawn lane by lane.
import { drawLane } from '/ui/timeline.js';

const TITLES = {
  sliding_log: 'Sliding log (exact)',
  sliding_window: 'Sliding window (approximated)',
  fixed_window: 'Fixed window',
  token_bucket: 'Token bucket',
  leaky_bucket: 'Leaky bucket',
};

const form = document.getElementById('parameters');
const lanes = document.getElementById('lanes');
const problem = document.getElementById('playground-error');
const summary = document.getElementById('playground-summary');

/**
 * The stream the page opens with: a burst, a pause, and a few more, so that every
 * algorithm blocks something and gives quota back in view.
 */
const EXAMPLE = [0, 100, 200, 300, 400, 1100, 1200, 1300, 1800, 2600, 2700];

/** The stream: request times in ms, in order; which request's window is drawn. */
const state = { times: [...EXAMPLE], selected: null, asked: 0 };

/** Wires the controls and draws the example stream. */
export function startPlayground() {
  form.addEventListener('input', refresh);
  form.addEventListener('submit', (event) => event.preventDefault());
  document.getElementById('algorithm').addEventListener('change', showFields);
  document.getElementById('add-request').addEventListener('click', () => addNext(1));
  document.getElementById('add-burst').addEventListener('click', () => addNext(5));
  document.getElementById('clear').addEventListener('click', () => {
    state.times = [];
    state.selected = null;
    refresh();
  });
  showFields();
}

function number(id) {
  return Number(document.getElementById(id).value);
}

function choice(id) {
  return document.getElementById(id).value;
}

/** Shows the parameters and legend entries of the chosen algorithm only. */
function showFields() {
  const algorithm = document.getElementById('algorithm').value;
  for (const element of document.querySelectorAll('#view-playground [data-for]')) {
    element.hidden = !element.dataset.for.split(' ').includes(algorithm);
  }
  refresh();
}

/** Adds `count` requests, one step apart, after the last one (the first at 0). */
function addNext(count) {
  for (let added = 0; added < count; added += 1) {
    const last = state.times[state.times.length - 1];
    state.times.push(last === undefined ? 0 : last + number('step'));
  }
  state.selected = state.times.length - 1;
  refresh();
}

function addAt(ms) {
  const at = Math.round(ms);
  const index = state.times.findIndex((time) => time > at);
  const position = index === -1 ? state.times.length : index;
  state.times.splice(position, 0, at);
  state.selected = position;
  refresh();
}

/** The policies to decide the stream under, in the configuration file's words. */
function policies() {
  const algorithm = document.getElementById('algorithm').value;
  const windowed = { limit: number('limit'), window: `${number('window')}ms` };
  switch (algorithm) {
    case 'compare':
      // Both count the same requests: allowed ones, or every attempt (a client that keeps
      // hammering stays blocked).
      return {
        sliding_log: { algorithm: 'sliding_log', ...windowed, variant: choice('variant') },
        sliding_window: { algorithm: 'sliding_window', ...windowed, variant: choice('variant') },
      };
    case 'fixed_window':
      return { fixed_window: { algorithm: 'fixed_window', ...windowed } };
    case 'token_bucket':
      return {
        token_bucket: {
          algorithm: 'token_bucket',
          capacity: number('capacity'),
          refill_amount: number('refill-amount'),
          refill_interval: `${number('refill-interval')}ms`,
        },
      };
    default:
      return { leaky_bucket: { algorithm: 'leaky_bucket', interval: `${number('interval')}ms`, burst: number('burst') } };
  }
}

/** Asks the server to decide the stream, and draws the answer if it is still the latest. */
async function refresh() {
  const asked = ++state.asked;
  const body = { policies: policies(), trace: state.times.map((ms) => ({ at_us: Math.round(ms * 1000) })) };
  let answer;
  try {
    const response = await fetch('/v1/playground', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    answer = await response.json();
    if (!response.ok) throw new Error(answer.message || `the service answered ${response.status}`);
  } catch (error) {
    if (asked === state.asked) problem.textContent = error.message;
    return;
  }
  if (asked !== state.asked) return;
  problem.textContent = '';
  draw(answer.policies);
}

function draw(runs) {
  const windowMs = document.getElementById('algorithm').value.endsWith('bucket') ? null : number('window');
  const last = state.times[state.times.length - 1] || 0;
  const spanMs = Math.max(last + 2 * number('step'), 3 * (windowMs || number('step') * 10));
  const differ = disagreements(runs);
  const selected = state.selected === null ? state.times.length - 1 : state.selected;
  lanes.replaceChildren(
    ...runs.map((run) =>
      drawLane({
        run,
        title: TITLES[run.algorithm] || run.algorithm,
        spanMs,
        windowMs,
        selected,
        differ,
        onAdd: addAt,
        onSelect: (index) => {
          state.selected = index;
          draw(runs);
        },
      }),
    ),
  );
  const note = runs.length > 1 ? ` · the two differ on ${differ.length}` : '';
  summary.textContent = `${state.times.length} requests${note}`;
}

/** Indexes of the requests the lanes did not all decide alike. */
function disagreements(runs) {
  if (runs.length < 2) return [];
  const [first, ...others] = runs;
  return first.decisions
    .map((decision, index) => (others.some((run) => run.decisions[index].allowed !== decision.allowed) ? index : -1))
    .filter((index) => index >= 0);
}
