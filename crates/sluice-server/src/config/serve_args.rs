//! Arguments of `sluice serve`.
//!
//! Every setting of `serve` ([`crate::config::settings`]) can also come from an environment
//! variable (`SLUICE_…`) or from the configuration file's `server:` section; a flag beats the
//! variable, which beats the file, which beats the default.

use crate::config::settings::SettingFlags;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `sluice serve`. `None` means "not given here": the file or the default decides.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct ServeArgs {
    /// The configuration file (YAML): Sluice policies and Envoy domains, or an
    /// envoyproxy/ratelimit file. Without it, a built-in example configuration is served.
    #[arg(long, env = "SLUICE_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Every service setting, as a flag or its variable.
    #[command(flatten)]
    pub(crate) settings: SettingFlags,
}
