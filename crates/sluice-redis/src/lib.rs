//! Redis and Redis Cluster store for Sluice: the same decisions as the in-memory store,
//! to the microsecond, shared by every application server.
//!
//! Each check is one command, one round trip whatever the number of limits checked
//! together: the Sluice module's `SLUICE.CHECK` where Redis has it loaded (the default,
//! [`ModuleUse::Detect`]; `crates/sluice-redis-module`, the core's own algorithms), else
//! `EVALSHA` of a server-side script (the crate's `lua/` directory), the twin of the core's
//! pure algorithms. Both keep the same bytes under the same keys. The sliding log is a Redis string of 8-byte timestamps: read
//! and written whole for a limit of up to 32, a ring buffer behind a 32-byte header beyond,
//! read slot by slot, so a decision is O(1) Redis work in the steady state and memory is
//! bounded by the limit.

#![forbid(unsafe_code)]

mod blocked;
mod cluster;
mod deadline;
mod exact_time;
mod failure;
mod health;
mod keys;
mod primary_name;
mod refusal;
mod script;
mod settings;
mod store;
mod tls;
mod url;

pub use failure::FailureMode;
pub use health::{Cause, NodeHealth, RedisHealth};
pub use primary_name::verify_primary_name;
pub use refusal::Refused;
pub use settings::{ModuleUse, RedisSettings, TimeSource};
pub use store::RedisStore;
pub use tls::{HandshakeError, TlsFiles, check_certificate_file, check_key_file};
pub use url::{check_redis_url, without_password};
