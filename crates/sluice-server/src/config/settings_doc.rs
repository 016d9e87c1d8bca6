//! `docs/service.md`'s table of settings is held to the settings declared in
//! [`crate::config::settings`]: one row per setting, in the same order, each with its flag,
//! variable, file field and default.

use crate::config::settings::DECLARED;

/// The table's rows, as `[flag, variable, file field, default]` cells without backticks.
fn documented_rows() -> Vec<[String; 4]> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/service.md");
    let text = std::fs::read_to_string(path).expect("docs/service.md is readable");
    text.lines()
        .filter(|line| line.starts_with("| `--"))
        .map(|line| {
            let cells: Vec<String> = line.split('|').map(|cell| cell.trim().replace('`', "")).collect();
            let flag = cells[1].trim_start_matches("--").split(' ').next().unwrap_or_default().to_owned();
            [flag, cells[2].clone(), cells[3].clone(), cells[4].clone()]
        })
        .filter(|[flag, ..]| flag != "config")
        .collect()
}

#[test]
fn the_documented_settings_are_the_declared_ones_in_order() {
    let documented: Vec<String> = documented_rows().into_iter().map(|[flag, ..]| flag).collect();
    let declared: Vec<String> = DECLARED.iter().map(|(name, ..)| name.replace('_', "-")).collect();
    assert_eq!(documented, declared, "docs/service.md's table against crate::config::settings");
}

#[test]
fn each_documented_row_has_the_declared_variable_field_and_default() {
    let without_spaces = |text: &str| text.replace(' ', "");
    for ([flag, variable, field, default], (name, env, shown)) in documented_rows().iter().zip(DECLARED) {
        assert_eq!((variable.as_str(), field.as_str()), (*env, *name), "--{flag}");
        assert!(
            without_spaces(default).starts_with(&without_spaces(shown)),
            "--{flag}: the table's default `{default}` is not `{shown}`"
        );
    }
}
