//! Every per-algorithm fact lives in the algorithm's own file, and the places that must
//! dispatch on the policy's variants are the ones `sluice-core/src/algorithm.rs`'s checklist
//! names (its "Adding an algorithm" section).
//!
//! Every library crate under `crates/` is read with `syn`; a pattern naming a variant of
//! `Policy` (`Policy::TokenBucket(_)`, in a `match` arm, an `if let`, a `matches!`) outside
//! inline test modules is a per-algorithm dispatch. A file that has one must be in the
//! checklist, or a new algorithm could miss it silently.

#![allow(missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The variants of `sluice_core::Policy`.
const VARIANTS: [&str; 5] = ["SlidingLog", "FixedWindow", "SlidingWindow", "TokenBucket", "LeakyBucket"];

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Patterns that name a `Policy` variant, found while visiting one file.
#[derive(Default)]
struct Dispatches {
    found: Vec<String>,
}

impl Dispatches {
    fn note(&mut self, path: &syn::Path) {
        let names: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
        if let [.., policy, variant] = names.as_slice()
            && policy == "Policy"
            && VARIANTS.contains(&variant.as_str())
        {
            self.found.push(format!("Policy::{variant}"));
        }
    }
}

impl<'ast> Visit<'ast> for Dispatches {
    fn visit_pat_tuple_struct(&mut self, pattern: &'ast syn::PatTupleStruct) {
        self.note(&pattern.path);
        syn::visit::visit_pat_tuple_struct(self, pattern);
    }

    /// `matches!(policy, Policy::X(_))`: a macro's tokens are not parsed as patterns, so
    /// they are searched as text.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if !mac.path.is_ident("matches") {
            return;
        }
        let tokens = mac.tokens.to_string().replace(' ', "");
        for variant in VARIANTS.iter().filter(|variant| tokens.contains(&format!("Policy::{variant}"))) {
            self.found.push(format!("Policy::{variant} in matches!"));
        }
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_test_module(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }
}

fn is_test_module(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg") && attr.meta.require_list().is_ok_and(|list| list.tokens.to_string() == "test")
    })
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The files (relative to `crates/<crate>/src/`) that dispatch on the policy's variants.
fn files_with_dispatches(crates: &Path) -> BTreeSet<String> {
    let mut with = BTreeSet::new();
    for krate in std::fs::read_dir(crates).expect("crates/ is readable") {
        let src = krate.expect("a crate folder").path().join("src");
        if !src.join("lib.rs").is_file() {
            continue;
        }
        for file in rust_files(&src) {
            let text = std::fs::read_to_string(&file).expect("a readable source file");
            let syntax = syn::parse_file(&text).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            let mut dispatches = Dispatches::default();
            dispatches.visit_file(&syntax);
            if !dispatches.found.is_empty() {
                let relative = file.strip_prefix(&src).expect("under src/").to_string_lossy().replace('\\', "/");
                with.insert(relative);
            }
        }
    }
    with
}

/// The checklist: the "Adding an algorithm" section of `algorithm.rs`'s module docs.
fn checklist(crates: &Path) -> String {
    let text = std::fs::read_to_string(crates.join("sluice-core/src/algorithm.rs")).expect("algorithm.rs");
    let section: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.contains("# Adding an algorithm"))
        .take_while(|line| line.starts_with("//!"))
        .collect();
    assert!(section.len() > 10, "algorithm.rs has its checklist");
    section.join("\n")
}

#[test]
fn only_the_files_the_checklist_names_dispatch_on_the_algorithm() {
    let crates = crates_dir();
    let listed = checklist(&crates);
    let unlisted: Vec<String> =
        files_with_dispatches(&crates).into_iter().filter(|file| !listed.contains(&format!("`{file}`"))).collect();
    assert!(
        unlisted.is_empty(),
        "these files match on Policy's variants but sluice-core/src/algorithm.rs's checklist does not name them \
         (move the fact into the algorithm, or add the file to the checklist): {unlisted:?}"
    );
}

#[test]
fn the_checker_finds_a_match_on_the_variants() {
    let source = "fn f(p: &Policy) -> u8 { match p { Policy::FixedWindow(_) => 1, _ => 2 } }\n\
                  fn g(p: &sluice_core::Policy) -> bool { matches!(p, sluice_core::Policy::TokenBucket(_)) }\n\
                  #[cfg(test)] mod tests { fn h(p: &Policy) -> bool { matches!(p, Policy::LeakyBucket(_)) } }\n\
                  fn build() -> Policy { Policy::SlidingLog(make()) }\n";
    let mut dispatches = Dispatches::default();
    dispatches.visit_file(&syn::parse_file(source).expect("valid Rust"));
    assert_eq!(dispatches.found, ["Policy::FixedWindow", "Policy::TokenBucket in matches!"]);
}
