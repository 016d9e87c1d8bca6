//! Reading YAML configuration the way Sluice does: every problem is collected with its path
//! (`policies.api.capacity: must be a whole number ≥ 1, got 0`) and reported at once, rather
//! than the first one alone.
//!
//! Shared by Sluice's policy files (`sluice-core`), the service's file and its
//! envoyproxy/ratelimit rules (`sluice-server`).
//!
//! ```
//! use sluice_config::{ConfigError, Fields, count};
//!
//! let yaml: serde_yaml_ng::Mapping = serde_yaml_ng::from_str("limit: 0\nburst: 3\n")?;
//! let mut problems = ConfigError::default();
//! let fields = Fields::new(&yaml, "policies.api");
//! let limit = fields.require("limit", &mut problems, count(1));
//! fields.finish(&["limit"], &[], &mut problems);
//! assert_eq!(limit, None);
//! let message = problems.into_result(()).unwrap_err().to_string();
//! assert!(message.contains("policies.api.limit: must be a whole number ≥ 1, got 0"));
//! assert!(message.contains("policies.api.burst: unknown field, expected one of: limit"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod duration;
mod error;
mod fields;
mod suggest;
mod values;

pub use duration::parse_duration;
pub use error::{ConfigError, Problem};
pub use fields::Fields;
pub use suggest::{closest, did_you_mean};
pub use values::{count, duration, join, show, text};
