// The live view's tables of what the store did per policy and per RLQS bucket: each
// policy's quota leases, and the RLQS buckets held by the most Envoys, each linked to
// its rule's row in the policies table.
import { emptyRow, policyLink, row } from '/ui/rows.js';

const LEASE_FIELDS = ['units_held', 'units_leased', 'units_returned', 'units_expired', 'leased_checks'];

/** Each policy's lease figures; the table is marked off when leases are (all null). */
export function renderPolicyLeases(policies) {
  const table = document.getElementById('policy-leases');
  const leased = policies.filter((policy) => policy.leases !== null);
  table.classList.toggle('off', leased.length === 0);
  const rows = leased.map((policy) => {
    const cells = LEASE_FIELDS.map((field) => [policy.leases[field].toLocaleString(), field, 'num']);
    const tr = row({ policy: policy.name }, [[policy.name, 'policy'], ...cells]);
    tr.firstChild.replaceChildren(policyLink(policy.name));
    return tr;
  });
  const none = 'no leases: the embedded store, or lease_period 0';
  table.querySelector('tbody').replaceChildren(...(rows.length ? rows : [emptyRow(6, none)]));
}

/** The RLQS buckets held by the most Envoys, each with its rule and holders' answers. */
export function renderRlqsBuckets(census) {
  const rows = census.buckets.map((bucket) => {
    const tr = row({ policy: bucket.policy, key: bucket.key }, [
      [bucket.policy, 'policy'],
      [bucket.key, 'key'],
      [String(bucket.holders), 'holders', 'num'],
      [String(bucket.share), 'share', 'num'],
      [String(bucket.refusal), 'refusal', bucket.refusal > 0 ? 'num rejecting' : 'num'],
      [String(bucket.none), 'none', 'num'],
    ]);
    tr.firstChild.replaceChildren(policyLink(bucket.policy));
    return tr;
  });
  const shown = `${census.buckets.length} of ${census.total} buckets with a limit`;
  document.getElementById('rlqs-buckets-note').dataset.total = String(census.total);
  document.getElementById('rlqs-buckets-count').textContent = shown;
  const body = document.querySelector('#rlqs-buckets tbody');
  body.replaceChildren(...(rows.length ? rows : [emptyRow(6, 'no RLQS bucket with a limit held')]));
}
