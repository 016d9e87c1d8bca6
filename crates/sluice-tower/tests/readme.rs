//! The README's "Use it in your axum app" section compiles as written: its `[dependencies]`
//! and its `main.rs`, put into a new Cargo project whose one Sluice dependency is this
//! crate (by path), pass `cargo check`; and its `main.rs` is the `axum_app` example.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The README's heading of the section.
const SECTION: &str = "## Use it in your axum app";
/// The path the README's manifest gives `sluice-tower`, relative to the user's project.
const README_PATH: &str = "../sluice/crates/sluice-tower";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_dir() -> PathBuf {
    crate_dir().join("../..")
}

/// The section of the README that shows an app.
fn section() -> String {
    let readme = std::fs::read_to_string(workspace_dir().join("README.md")).expect("README.md");
    let start = readme.find(SECTION).unwrap_or_else(|| panic!("README.md has no `{SECTION}`"));
    let rest = &readme[start + SECTION.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// The body of the one code block of `language` in `text`.
fn block(text: &str, language: &str) -> String {
    let fence = format!("\n```{language}\n");
    let mut blocks = text.match_indices(&fence).map(|(at, _)| {
        let body = &text[at + fence.len()..];
        body[..body.find("```\n").expect("a closed block")].to_owned()
    });
    let first = blocks.next().unwrap_or_else(|| panic!("no ```{language} block in `{SECTION}`"));
    assert!(blocks.next().is_none(), "more than one ```{language} block in `{SECTION}`");
    first
}

#[test]
fn the_readme_app_is_the_axum_app_example() {
    let example = std::fs::read_to_string(crate_dir().join("examples/axum_app.rs")).expect("the example");
    assert_eq!(block(&section(), "rust"), example, "README.md's main.rs and examples/axum_app.rs differ");
}

#[test]
fn the_readme_app_has_one_sluice_dependency() {
    let manifest = block(&section(), "toml");
    let sluice: Vec<&str> = manifest.lines().filter(|line| line.starts_with("sluice")).collect();
    assert_eq!(sluice, [format!("sluice-tower = {{ path = \"{README_PATH}\" }}")], "{manifest}");
}

/// Writes the README's app into `dir`, its `sluice-tower` pointing at this crate.
fn write_project(dir: &Path) {
    let section = section();
    let dependencies = block(&section, "toml").replace(README_PATH, &crate_dir().display().to_string());
    let manifest = format!(
        "[package]\nname = \"readme-app\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [workspace]\n\n{dependencies}"
    );
    std::fs::create_dir_all(dir.join("src")).expect("src/");
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::write(dir.join("src/main.rs"), block(&section, "rust")).expect("main.rs");
    // The workspace's versions, so that the check runs offline on what is downloaded.
    std::fs::copy(workspace_dir().join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
}

/// Where the check builds: beside this test's own build, in a directory of its own (the
/// test's `cargo` holds the lock of its own), kept between runs so that only the first
/// one compiles the dependencies.
fn target_dir() -> PathBuf {
    let test = std::env::current_exe().expect("test path");
    // target/<profile>/deps/<test> → target/readme-app
    let target = test.ancestors().nth(3).expect("target/");
    target.join("readme-app")
}

#[test]
fn the_readme_app_compiles_with_sluice_tower_alone() {
    let project = target_dir().join("project");
    let _ = std::fs::remove_dir_all(&project);
    write_project(&project);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir().join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(output.status.success(), "the README's app does not compile:\n{}", String::from_utf8_lossy(&output.stderr));
}
