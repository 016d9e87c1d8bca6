//! The macro that turns the list of service settings ([`crate::config::settings`]) into
//! everything a setting needs: its flag and environment variable ([`SettingFlags`]), its
//! field in the file's `server:` section ([`ServerSection`]), its resolved value
//! ([`Settings`]), the precedence between them, and the row its documentation shows.
//!
//! A setting is declared once, as
//!
//! ```text
//! "one line of help."
//! name: ResolvedType, from RawType, env "SLUICE_NAME", default(value) | default(expr, "shown")
//!     | optional("shown"), parse parser, #[arg(clap extras)]*;
//! ```
//!
//! The raw value comes from the flag, else its variable (clap), else the file, else the
//! default; `parse` turns it into the resolved value, or the problem reported at the
//! setting's name. An `optional` setting has no default: `parse` sees only a given value.
//!
//! [`SettingFlags`]: crate::config::settings::SettingFlags
//! [`ServerSection`]: crate::config::settings::ServerSection
//! [`Settings`]: crate::config::settings::Settings

/// Declares the service's settings; see the module documentation.
macro_rules! declare_settings {
    ($(
        $help:literal
        $name:ident : $ty:ty, from $raw:ty, env $env:literal, $kind:ident ( $($default:tt)* ),
        parse $parse:expr $(, #[$extra:meta])* ;
    )*) => {
        /// The settings given as flags or environment variables; `None`: not given there.
        #[derive(Clone, Debug, Default, clap::Args)]
        pub(crate) struct SettingFlags {
            $(
                #[arg(long, env = $env, help = concat!(
                    $help, " [default: ", declare_settings!(@shown $kind ($($default)*)), "]"
                ))]
                $(#[$extra])*
                pub(crate) $name: Option<$raw>,
            )*
        }

        /// The configuration file's optional `server:` section: the same settings as the flags.
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct ServerSection {
            $(pub(crate) $name: Option<$raw>,)*
        }

        /// Every setting of a running service, resolved.
        #[derive(Clone, Debug)]
        pub(crate) struct Settings {
            $(#[doc = $help] pub(crate) $name: $ty,)*
        }

        /// Every setting's name, as the file's `server:` section writes it.
        pub(crate) const SETTING_NAMES: &[&str] = &[$(stringify!($name),)*];

        /// Each setting as the documentation lists it: name, variable, default as shown.
        #[cfg(test)]
        pub(crate) const DECLARED: &[(&str, &str, &str)] = &[
            $((stringify!($name), $env, declare_settings!(@shown $kind ($($default)*))),)*
        ];

        impl Settings {
            /// Merges `flags` (flags, then environment, as clap resolved them) over the
            /// file's `server:` section over the defaults. Every bad value is reported.
            ///
            /// # Errors
            ///
            /// Every bad value, each named where it was given: the flag (`--redis-timeout`),
            /// its variable (`SLUICE_REDIS_TIMEOUT`) or the file's field
            /// (`server.redis_timeout`).
            pub(crate) fn resolve(
                flags: &SettingFlags,
                file: &ServerSection,
            ) -> Result<Settings, sluice_config::ConfigError> {
                let mut problems = sluice_config::ConfigError::default();
                $(
                    let source = $crate::config::declare::Source::of(flags.$name.is_some(), file.$name.is_some());
                    let given = flags.$name.clone().or_else(|| file.$name.clone());
                    let $name: Result<$ty, String> =
                        declare_settings!(@value $kind ($($default)*) given, $parse);
                    let $name = problems.take(&source.name(stringify!($name), $env), $name);
                )*
                let settings = (|| Some(Settings { $($name: $name?,)* }))();
                let settings = problems.into_result(settings)?;
                // Every field is `Some` once no problem was found.
                settings.ok_or_else(|| sluice_config::ConfigError::single("", "incomplete settings"))
            }
        }
    };
    (@shown default ($value:literal)) => { concat!($value) };
    (@shown default ($value:expr, $shown:literal)) => { $shown };
    (@shown optional ($shown:literal)) => { $shown };
    (@value default ($value:literal) $given:ident, $parse:expr) => {
        ($parse)($given.unwrap_or_else(|| $value.into()))
    };
    (@value default ($value:expr, $shown:literal) $given:ident, $parse:expr) => {
        ($parse)($given.unwrap_or_else(|| $value.into()))
    };
    (@value optional ($shown:literal) $given:ident, $parse:expr) => {
        $given.map_or(Ok(None), $parse)
    };
}

pub(crate) use declare_settings;

/// Where a setting's value came from, to name it in a problem as the user wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A flag or its environment variable (clap merged them).
    Flags,
    /// The configuration file's `server:` section.
    File,
    /// The default.
    Default,
}

impl Source {
    /// The source of a value given (or not) as a flag and in the file: flags win.
    pub(crate) fn of(in_flags: bool, in_file: bool) -> Source {
        match (in_flags, in_file) {
            (true, _) => Source::Flags,
            (false, true) => Source::File,
            (false, false) => Source::Default,
        }
    }

    /// The setting `name` (variable `env`) as given: `--name-with-dashes`, or the variable
    /// when it is set and the command line has no such flag; `server.name` from the file.
    pub(crate) fn name(self, name: &str, env: &str) -> String {
        match self {
            Source::Flags => {
                let flag = format!("--{}", name.replace('_', "-"));
                if std::env::var_os(env).is_some() && !on_command_line(&flag) { env.to_owned() } else { flag }
            }
            Source::File => format!("server.{name}"),
            Source::Default => name.to_owned(),
        }
    }
}

/// Whether this process's command line gives `flag` (`--flag VALUE` or `--flag=VALUE`):
/// clap keeps the flag's value over its variable's without saying which it took.
fn on_command_line(flag: &str) -> bool {
    std::env::args_os().any(|argument| {
        let argument = argument.to_string_lossy();
        argument == flag || argument.strip_prefix(flag).is_some_and(|rest| rest.starts_with('='))
    })
}
