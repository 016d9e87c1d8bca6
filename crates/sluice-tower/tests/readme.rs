//! The README's app sections compile as written: "Use it in your axum app" and "Share the
//! limit through Redis". Each section's `[dependencies]` and `main.rs`, put into a new
//! Cargo project whose one Sluice dependency is this crate (by path), pass `cargo check`;
//! and each `main.rs` is an example of this crate (`axum_app`, `axum_redis`). So do
//! docs/tower.md's Rust snippets (its doctests see this crate's dev-dependencies too, so
//! they alone would not show that this crate is all a snippet needs).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The README's app sections: each heading, and the example its `main.rs` is.
const SECTIONS: [(&str, &str); 2] =
    [("## Use it in your axum app", "axum_app"), ("## Share the limit through Redis", "axum_redis")];
/// The path the README's manifest gives `sluice-tower`, relative to the user's project.
const README_PATH: &str = "../sluice/crates/sluice-tower";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_dir() -> PathBuf {
    crate_dir().join("../..")
}

/// The section of the README under `heading`.
fn section(heading: &str) -> String {
    let readme = std::fs::read_to_string(workspace_dir().join("README.md")).expect("README.md");
    let start = readme.find(heading).unwrap_or_else(|| panic!("README.md has no `{heading}`"));
    let rest = &readme[start + heading.len()..];
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
    let first = blocks.next().unwrap_or_else(|| panic!("no ```{language} block in the section"));
    assert!(blocks.next().is_none(), "more than one ```{language} block in the section");
    first
}

#[test]
fn each_readme_app_is_an_example() {
    for (heading, name) in SECTIONS {
        let example = std::fs::read_to_string(crate_dir().join(format!("examples/{name}.rs"))).expect("the example");
        assert_eq!(block(&section(heading), "rust"), example, "README.md's `{heading}` and examples/{name}.rs differ");
    }
}

#[test]
fn each_readme_app_has_one_sluice_dependency() {
    let features = ["", ", features = [\"redis\"]"];
    for ((heading, _), features) in SECTIONS.into_iter().zip(features) {
        let manifest = block(&section(heading), "toml");
        let sluice: Vec<&str> = manifest.lines().filter(|line| line.starts_with("sluice")).collect();
        assert_eq!(sluice, [format!("sluice-tower = {{ path = \"{README_PATH}\"{features} }}")], "{manifest}");
    }
}

/// Writes the README's app of the section under `heading` into `dir`, its `sluice-tower`
/// pointing at this crate.
fn write_project(dir: &Path, heading: &str) {
    let section = section(heading);
    let dependencies = block(&section, "toml").replace(README_PATH, &crate_dir().display().to_string());
    write_manifest(dir, &dependencies);
    std::fs::write(dir.join("src/main.rs"), block(&section, "rust")).expect("main.rs");
}

/// Writes a new project's manifest with `dependencies` into `dir`, and the workspace's lock
/// file (its versions, so that the check runs offline on what is downloaded).
fn write_manifest(dir: &Path, dependencies: &str) {
    let manifest = format!(
        "[package]\nname = \"readme-app\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [workspace]\n\n{dependencies}"
    );
    std::fs::create_dir_all(dir.join("src")).expect("src/");
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::copy(workspace_dir().join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
}

/// docs/tower.md's Rust blocks that rustdoc compiles, as it compiles them: hidden lines
/// (`# …`) shown.
fn guide_blocks() -> Vec<String> {
    let guide = std::fs::read_to_string(workspace_dir().join("docs/tower.md")).expect("docs/tower.md");
    let shown = |line: &str| line.strip_prefix("# ").or((line == "#").then_some("")).unwrap_or(line).to_owned();
    let blocks = guide.split("\n```rust").skip(1).filter_map(|rest| {
        let (fence, body) = rest.split_once('\n').expect("a fence line");
        let body = &body[..body.find("```\n").expect("a closed block")];
        (!fence.contains("ignore")).then(|| body.lines().map(shown).collect::<Vec<_>>().join("\n"))
    });
    blocks.collect()
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
fn the_readme_axum_app_compiles_with_sluice_tower_alone() {
    check_project("project", SECTIONS[0].0);
}

#[test]
fn the_readme_redis_app_compiles_with_sluice_tower_alone() {
    check_project("project-redis", SECTIONS[1].0);
}

#[test]
fn the_tower_guide_compiles_with_sluice_tower_alone() {
    let blocks = guide_blocks();
    assert!(!blocks.is_empty(), "docs/tower.md has no Rust block");
    let project = target_dir().join("project-guide");
    let _ = std::fs::remove_dir_all(&project);
    let path = crate_dir().display().to_string();
    write_manifest(
        &project,
        &format!("[dependencies]\nsluice-tower = {{ path = \"{path}\", features = [\"redis\"] }}\n"),
    );
    let modules: String = blocks
        .iter()
        .enumerate()
        .map(|(index, block)| format!("#[allow(dead_code)]\nmod snippet_{index} {{\n{block}\n}}\n"))
        .collect();
    std::fs::write(project.join("src/lib.rs"), modules).expect("lib.rs");
    check(&project);
}

/// Writes the app of the section under `heading` into `target/readme-app/<name>` and
/// checks it, in the target directory the README's apps share (so that their common
/// dependencies compile once).
fn check_project(name: &str, heading: &str) {
    let project = target_dir().join(name);
    let _ = std::fs::remove_dir_all(&project);
    write_project(&project, heading);
    check(&project);
}

/// `cargo check` of the project in `project`, in the target directory the projects share.
fn check(project: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir().join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{} does not compile:\n{errors}", project.display());
}
