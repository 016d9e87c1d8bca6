//! The configuration file's `server:` section, read field by field so that one bad field
//! hides no other problem: an unknown name (a `stor` typo) is reported with the name it
//! probably meant, and every known field is still read and checked (`workers: 0`).

use crate::config::settings::{SETTING_NAMES, ServerSection, SettingFlags, Settings};
use serde_yaml_ng::{Mapping, Value};
use sluice_config::show;
use sluice_core::config::ConfigError;

/// The `server:` section of `top`, its values checked as `sluice serve` will resolve them
/// (flags and environment variables may still override them then); every problem goes to
/// `problems`, each at `server.<field>`.
pub(crate) fn parse_server(top: &Mapping, problems: &mut ConfigError) -> ServerSection {
    let fields = match top.get("server") {
        None | Some(Value::Null) => return ServerSection::default(),
        Some(Value::Mapping(fields)) => fields,
        Some(_) => {
            problems.push("server", "must be a mapping of settings (`sluice serve --help` lists them)");
            return ServerSection::default();
        }
    };
    let section = readable_fields(fields, problems);
    match Settings::resolve(&SettingFlags::default(), &section) {
        Err(error) => problems.extend(error),
        Ok(settings) => {
            if let Some((setting, problem)) = settings.problem_between() {
                problems.push(&format!("server.{setting}"), problem);
            }
        }
    }
    section
}

/// The section made of the fields that can be read, each read alone so that a problem is
/// reported at its own field.
fn readable_fields(fields: &Mapping, problems: &mut ConfigError) -> ServerSection {
    let mut readable = Mapping::new();
    for (name, value) in fields {
        let path = format!("server.{}", show(name));
        let Some(known) = name.as_str().filter(|name| SETTING_NAMES.contains(name)) else {
            problems.push(&path, unknown_field(name));
            continue;
        };
        let alone = Mapping::from_iter([(name.clone(), value.clone())]);
        match serde_yaml_ng::from_value::<ServerSection>(Value::Mapping(alone)) {
            Ok(_) => drop(readable.insert(name.clone(), value.clone())),
            Err(error) => problems.push(&path, format!("cannot read `{known}`: {error}")),
        }
    }
    // Each field was read alone already; together they read the same.
    serde_yaml_ng::from_value(Value::Mapping(readable)).unwrap_or_default()
}

/// The problem of a field no setting has: the setting it probably meant, when one is close.
fn unknown_field(name: &Value) -> String {
    match name.as_str().and_then(|name| sluice_config::closest(name, SETTING_NAMES.iter().copied())) {
        Some(known) => format!("unknown setting (did you mean `{known}`?)"),
        None => "unknown setting (`sluice serve --help` lists them)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(server: &str) -> String {
        let top: Mapping = serde_yaml_ng::from_str(&format!("server: {server}")).unwrap();
        let mut problems = ConfigError::default();
        parse_server(&top, &mut problems);
        if problems.is_empty() { String::new() } else { problems.to_string() }
    }

    /// Issue 36.7: a `stor` typo hid `workers: 0`.
    #[test]
    fn an_unknown_field_hides_no_other_problem() {
        let found = problems("{stor: memory, workers: 0, redis_timeout: soon}");
        for needle in [
            "server.stor: unknown setting (did you mean `store`?)",
            "server.workers: must be between 1 and 256",
            "server.redis_timeout:",
        ] {
            assert!(found.contains(needle), "{needle:?} missing from {found}");
        }
    }

    #[test]
    fn a_field_of_the_wrong_type_hides_no_other_problem() {
        let found = problems("{workers: [1], max_connections: 0}");
        assert!(found.contains("server.workers: cannot read `workers`"), "{found}");
        assert!(found.contains("server.max_connections:"), "{found}");
    }

    #[test]
    fn a_name_far_from_every_setting_gets_no_guess() {
        assert!(problems("{colour: blue}").contains("server.colour: unknown setting (`sluice serve --help`"));
        assert_eq!(problems("~"), "", "an empty section");
    }

    #[test]
    fn two_letters_swapped_are_still_a_typo() {
        assert!(problems("{wrokers: 2}").contains("server.wrokers: unknown setting (did you mean `workers`?)"));
    }
}
