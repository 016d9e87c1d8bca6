//! The workspace's module import graph has no cycle.
//!
//! Every library crate under `crates/` is read with `syn`: each file is one module, and a
//! module depends on another when it names it in a path (`crate::a::b`, `super::x`,
//! `child::item`, or through a name a `use` brought in). A path to a name that a module
//! only imports (`use inner::Item`, `pub use` too) leads to the module that defines it, so a
//! crate root that re-exports its API is not a hub that joins every module into one cycle.
//! A module naming one of its ancestors (`super::Error`) is not an edge: a child is part of
//! its parent, as a file is part of its folder. Cycles between siblings, or between a module
//! and another branch of the tree, are what this test forbids.
//! Inline test modules (`#[cfg(test)] mod tests { … }`) are skipped: they may use anything.

#![allow(missing_docs)]

mod module_graph_support;

use module_graph_support::{Crate, cycle_edges, cycles};
use std::path::PathBuf;

fn workspace_crates() -> Vec<PathBuf> {
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut roots: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("crates/ is readable")
        .map(|entry| entry.expect("crates/ entry").path().join("src"))
        .filter(|src| src.join("lib.rs").is_file())
        .collect();
    roots.sort();
    roots
}

#[test]
fn no_crate_in_the_workspace_has_an_import_cycle() {
    let roots = workspace_crates();
    assert!(roots.len() >= 4, "found the library crates: {roots:?}");
    let mut report = String::new();
    for src in &roots {
        let krate = Crate::read(src);
        assert!(krate.module_count() > 1, "{} has modules", src.display());
        for cycle in cycles(&krate) {
            report.push_str(&format!("{}: {}\n", src.display(), cycle.join(", ")));
            for edge in cycle_edges(&krate, &cycle) {
                report.push_str(&format!("    {edge}\n"));
            }
        }
    }
    assert!(report.is_empty(), "import cycles:\n{report}");
}

#[test]
fn the_checker_finds_a_cycle_through_a_child_and_its_parent() {
    let dir = std::env::temp_dir().join(format!("sluice-module-graph-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("temp dir");
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use b::Thing;\n").expect("write");
    std::fs::write(src.join("a.rs"), "mod inner;\nfn f() -> crate::Thing { inner::g() }\n").expect("write");
    std::fs::write(src.join("a/inner.rs"), "use super::super::b;\npub fn g() -> b::Thing { b::Thing }\n")
        .expect("write");
    std::fs::write(src.join("b.rs"), "pub struct Thing;\nfn h() { crate::a::f(); }\n").expect("write");
    let found = cycles(&Crate::read(&src));
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(found.len(), 1, "{found:?}");
    let mut members = found[0].clone();
    members.sort();
    assert_eq!(members, vec!["a", "a::inner", "b"], "a -> a::inner -> b (b::Thing) -> a (crate::a::f)");
}
