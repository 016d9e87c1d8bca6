//! Envoy's Rate Limit Quota Service (RLQS): Envoy enforces locally and reports each
//! bucket's usage on one bidirectional stream; Sluice gives each Envoy a share of the
//! bucket's limit (a token bucket with a time to live), or tells it to abandon a bucket.
//!
//! A bucket id (a map) is matched as the RLS descriptor of its entries sorted by key, in
//! the domain the stream's first report names, against the same rules as the RLS
//! ([`crate::envoy`]), so one rule file serves both. A share is paid from the limit's
//! state before it is assigned ([`payer`]), so RLS checks, RLQS shares and every server
//! sharing the store draw on one quota; docs/service.md ("RLQS") writes out the bound.
//!
//! - [`timing`], [`holder`], [`shares`]: the pure, clock-driven allocator of one bucket.
//! - [`round`]: one division round, paying before assigning, over a [`payer::QuotaPayer`].
//! - [`report`], [`assignment`]: Envoy's messages in, Envoy's actions out.
//! - [`hub`]: the process-wide task holding every stream and bucket.

pub(crate) mod assignment;
pub(crate) mod holder;
pub(crate) mod hub;
pub(crate) mod payer;
pub(crate) mod report;
pub(crate) mod round;
pub(crate) mod shares;
pub(crate) mod timing;
