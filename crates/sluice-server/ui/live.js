// The live view: polls GET /v1/live every second and shows counts, rates, the last
// minutes' checks per second, each policy's top keys with their error bounds, states
// and leases, and the RLQS buckets held by the most Envoys.
import { drawRates } from '/ui/rates.js';
import { emptyRow, policyAnchor, row } from '/ui/rows.js';
import { renderPolicyLeases, renderRlqsBuckets } from '/ui/store_tables.js';

const POLL_MS = 1000;
const status = document.getElementById('status');
let previous = null;

/** Starts polling; runs until the page closes. */
export function startLive() {
  poll();
}

async function poll() {
  try {
    const response = await fetch('/v1/live', { cache: 'no-store' });
    if (!response.ok) {
      throw new Error(`the service answered ${response.status}`);
    }
    const live = await response.json();
    render(live, performance.now());
    status.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove('error');
  } catch (error) {
    status.textContent = `cannot reach the service: ${error.message}`;
    status.classList.add('error');
  }
  setTimeout(poll, POLL_MS);
}

function render(live, now) {
  renderPolicies(live.policies, now);
  drawRates(document.getElementById('rate-chart'), live.per_second);
  renderTopKeys('top-denied', live.policies, 'top_denied');
  renderTopKeys('top-consumed', live.policies, 'top_consumed');
  renderPolicyLeases(live.policies);
  renderRlqsBuckets(live.rlqs_buckets);
  document.getElementById('leases').classList.toggle('off', live.leases === null);
  const tables = [['without-store', live.without_store], ['rlqs', live.rlqs], ['leases', live.leases ?? {}]];
  for (const [table, counts] of tables) {
    for (const [field, count] of Object.entries(counts)) {
      const cell = document.querySelector(`#${table} [data-field="${field}"]`);
      if (cell) cell.textContent = count.toLocaleString();
    }
  }
  previous = { at: now, policies: new Map(live.policies.map((policy) => [policy.name, policy])) };
}

/** Requests per second since the previous poll (blank on the first). */
function rate(policy, field, now) {
  const before = previous && previous.policies.get(policy.name);
  if (!before) return '–';
  const seconds = (now - previous.at) / 1000;
  return seconds > 0 ? ((policy[field] - before[field]) / seconds).toFixed(1) : '–';
}

function renderPolicies(policies, now) {
  const body = document.querySelector('#policies tbody');
  const rows = policies.map((policy) => {
    const shadow = (policy.envoy_rule ? ' (Envoy rule)' : '') + (policy.shadow_mode ? ' (shadow)' : '');
    const rejectedRate = rate(policy, 'rejected', now);
    const tr = row({ policy: policy.name }, [
      [policy.name + shadow, 'name'],
      [policy.algorithm, 'algorithm'],
      [policy.limit_text, 'limit'],
      [rate(policy, 'allowed', now), 'allowed_rate', 'num'],
      [rejectedRate, 'rejected_rate', Number(rejectedRate) > 0 ? 'num rejecting' : 'num'],
      [String(policy.allowed), 'allowed', 'num'],
      [String(policy.rejected), 'rejected', 'num'],
      [String(policy.shadow_rejected), 'shadow_rejected', 'num'],
      [String(policy.near_limit), 'near_limit', 'num'],
      [policy.keys_estimate === null ? '–' : `≈${policy.keys_estimate}`, 'keys_estimate', 'num'],
      [policy.states === null ? '–' : String(policy.states), 'states', 'num'],
    ]);
    tr.id = policyAnchor(policy.name);
    return tr;
  });
  body.replaceChildren(...(rows.length ? rows : [emptyRow(11, 'no policies')]));
}

/**
 * One table of this minute's top keys, every policy's in turn: each key with its count
 * and how much that count may overstate; a policy's listed keys include every key above
 * its bound (n / k).
 */
function renderTopKeys(table, policies, field) {
  const body = document.querySelector(`#${table} tbody`);
  const rows = policies.flatMap((policy) => {
    const top = policy[field];
    if (!top) return [];
    return top.keys.map((entry) =>
      row({ policy: policy.name, key: entry.key }, [
        [policy.name, 'policy'],
        [entry.key, 'key'],
        [String(entry.count), 'count', 'num'],
        [entry.error > 0 ? `≤ ${entry.error}` : 'exact', 'error', 'num'],
        [`${top.total} / ${top.bound}`, 'bound', 'num'],
      ]),
    );
  });
  body.replaceChildren(...(rows.length ? rows : [emptyRow(5, 'none this minute')]));
}
