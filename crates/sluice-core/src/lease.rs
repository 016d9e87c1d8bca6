//! Quota leases: global limits at local speed, never over the limit.
//!
//! A process that shares a store (Redis) wraps it in a [`LeasedStore`]. When a request
//! reaches the store, the store may debit more than the request's cost in the same atomic
//! check ([`Store::check_and_lease`](crate::Store::check_and_lease)): the extra units are
//! admitted there as if spent at once, and this process then spends them on later
//! requests for the same key and limits without asking the store, for as long as the
//! exact definition of every limit allows (the window or bucket they were taken in, and
//! the lease period). A request they cannot cover goes to the store, which decides it
//! exactly. docs/leases.md has the argument for each algorithm and the bounds.
//!
//! Only limits that can be leased exactly are leased: every algorithm but the `attempts`
//! variants. Windows are debited in the window or bucket of the decision; the sliding log
//! and the buckets hold leased units apart until the lease's deadline
//! ([`LeaseTerms`](crate::algorithm::LeaseTerms)). [`check_leasable`] says why the others
//! cannot be; a [`LeasedStore`] checks those against the store on every request, and
//! `sluice serve` refuses them when leases are on. A limit whose whole quota is 4 or less
//! is never leased either (leases take at most a quarter of what remains):
//! [`never_leased`] names both cases.

mod by_limit;
mod counters;
mod held;
mod leased_store;
mod ledger;
mod never_leased;
mod parcel;
mod sizing;
mod terms;

pub use by_limit::LimitLeaseFigures;
pub use counters::LeaseFigures;
pub use held::Unspent;
pub use leased_store::{DEFAULT_LEASE_ENTRIES, LeasedStore};
pub use never_leased::{NoLease, never_leased};
pub use terms::{LeaseRefusal, check_leasable};
