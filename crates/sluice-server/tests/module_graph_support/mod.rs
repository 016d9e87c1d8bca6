//! Reads a crate's module tree with `syn` and finds the cycles in its import graph, and
//! ([`impls`]) the inherent impls written away from their type.

mod impls;

pub(crate) use impls::impls_away_from_their_type;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A module's path from the crate root: `[]` is the root, `["http", "api"]` is `http::api`.
type ModulePath = Vec<String>;

/// What one module file says about its names and paths.
#[derive(Default)]
struct Module {
    /// Names a `use` brought into scope, and the path each stands for.
    imports: BTreeMap<String, Vec<String>>,
    /// Every path the module's code names, as written (`use` trees flattened).
    paths: Vec<Vec<String>>,
    /// The self type of each inherent `impl` block (`impl Hub`, `impl super::Hub`), as written.
    impls: Vec<Vec<String>>,
}

/// A library crate: its modules by path.
pub(crate) struct Crate {
    modules: BTreeMap<ModulePath, Module>,
}

impl Crate {
    /// Reads the crate whose `lib.rs` is in `src`.
    pub(crate) fn read(src: &Path) -> Crate {
        let mut modules = BTreeMap::new();
        for (path, file) in module_files(src) {
            let text = std::fs::read_to_string(&file).expect("module file is readable");
            let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let mut module = Module::default();
            ModuleReader { module: &mut module }.visit_file(&syntax);
            modules.insert(path, module);
        }
        Crate { modules }
    }

    /// How many modules the crate has.
    pub(crate) fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// The modules each module depends on.
    fn edges(&self) -> BTreeMap<&ModulePath, BTreeSet<ModulePath>> {
        let mut edges = BTreeMap::new();
        for (from, module) in &self.modules {
            let targets = module
                .paths
                .iter()
                .filter_map(|path| self.resolve(from, path, 0))
                .filter(|target| !from.starts_with(target))
                .collect();
            edges.insert(from, targets);
        }
        edges
    }

    /// The module that defines what `path`, written in module `from`, names.
    fn resolve(&self, from: &ModulePath, path: &[String], depth: usize) -> Option<ModulePath> {
        if depth > 16 {
            return None;
        }
        let (start, rest) = self.anchor(from, path, depth)?;
        let mut module = start;
        let mut index = 0;
        while index < rest.len() {
            let mut child = module.clone();
            child.push(rest[index].clone());
            if self.modules.contains_key(&child) {
                module = child;
                index += 1;
                continue;
            }
            let imported = self.modules.get(&module)?.imports.get(&rest[index]);
            if let Some(target) = imported {
                let mut through: Vec<String> = target.clone();
                through.extend(rest[index + 1..].iter().cloned());
                return self.resolve(&module, &through, depth + 1).or(Some(module));
            }
            break;
        }
        Some(module)
    }

    /// Where a path starts (`crate`, `super`, `self`, a child module, an imported name) and
    /// the segments left to walk; `None` for paths into other crates or the prelude.
    fn anchor(&self, from: &ModulePath, path: &[String], depth: usize) -> Option<(ModulePath, Vec<String>)> {
        let first = path.first()?;
        match first.as_str() {
            "crate" => Some((Vec::new(), path[1..].to_vec())),
            "self" => Some((from.clone(), path[1..].to_vec())),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let parent = from.get(..from.len().checked_sub(supers)?)?.to_vec();
                Some((parent, path[supers..].to_vec()))
            }
            name => {
                let mut child = from.clone();
                child.push(name.to_owned());
                if self.modules.contains_key(&child) {
                    return Some((from.clone(), path.to_vec()));
                }
                let imported = self.modules.get(from)?.imports.get(name)?;
                let mut full = imported.clone();
                full.extend(path[1..].iter().cloned());
                let target = self.resolve(from, &full, depth + 1)?;
                Some((target, Vec::new()))
            }
        }
    }
}

/// Each import inside a cycle: `from -> to (the path written in from)`.
pub(crate) fn cycle_edges(krate: &Crate, group: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    for (from, module) in &krate.modules {
        if !group.contains(&display(from)) {
            continue;
        }
        for path in &module.paths {
            let Some(to) = krate.resolve(from, path, 0) else { continue };
            if !from.starts_with(&to) && group.contains(&display(&to)) {
                lines.push(format!("{} -> {} ({})", display(from), display(&to), path.join("::")));
            }
        }
    }
    lines.dedup();
    lines
}

/// Every strongly connected group of more than one module, each as module paths.
pub(crate) fn cycles(krate: &Crate) -> Vec<Vec<String>> {
    groups(&krate.edges())
}

/// The strongly connected groups of more than one node in `edges`.
fn groups(edges: &BTreeMap<&ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<String>> {
    let nodes: Vec<&ModulePath> = edges.keys().copied().collect();
    let mut groups = Vec::new();
    let mut done: BTreeSet<&ModulePath> = BTreeSet::new();
    for &node in &nodes {
        if done.contains(node) {
            continue;
        }
        let forward = reachable(edges, node);
        let group: Vec<&ModulePath> =
            forward.iter().copied().filter(|other| reachable(edges, other).contains(node)).collect();
        done.extend(group.iter().copied());
        if group.len() > 1 {
            groups.push(group.iter().map(|path| display(path)).collect());
        }
    }
    groups
}

/// Every module reachable from `start` (itself included).
fn reachable<'a>(
    edges: &'a BTreeMap<&ModulePath, BTreeSet<ModulePath>>,
    start: &'a ModulePath,
) -> BTreeSet<&'a ModulePath> {
    let mut seen = BTreeSet::from([start]);
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        for next in edges.get(node).into_iter().flatten() {
            if let Some((key, _)) = edges.get_key_value(next)
                && seen.insert(*key)
            {
                stack.push(*key);
            }
        }
    }
    seen
}

fn display(path: &ModulePath) -> String {
    if path.is_empty() { "crate".to_owned() } else { path.join("::") }
}

/// Every module file under `src`, by module path (`lib.rs` is the root; `a.rs` and `a/mod.rs`
/// are `a`; `a/b.rs` is `a::b`). `main.rs` and `bin/` are other crates.
fn module_files(src: &Path) -> Vec<(ModulePath, PathBuf)> {
    let mut found = vec![(Vec::new(), src.join("lib.rs"))];
    collect(src, &Vec::new(), &mut found);
    found
}

fn collect(dir: &Path, prefix: &ModulePath, found: &mut Vec<(ModulePath, PathBuf)>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("src dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        if entry.is_dir() {
            if prefix.is_empty() && name == "bin" {
                continue;
            }
            let mut inner = prefix.clone();
            inner.push(name);
            collect(&entry, &inner, found);
        } else if entry.extension().is_some_and(|e| e == "rs") {
            if prefix.is_empty() && (name == "lib" || name == "main") {
                continue;
            }
            let mut path = prefix.clone();
            if name != "mod" {
                path.push(name);
            }
            found.push((path, entry));
        }
    }
}

/// Walks one file's syntax, recording its imports, re-exports and paths.
struct ModuleReader<'m> {
    module: &'m mut Module,
}

impl<'ast> Visit<'ast> for ModuleReader<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        flatten(&item.tree, &mut Vec::new(), &mut leaves);
        for (path, name) in leaves {
            if let Some(name) = name {
                self.module.imports.insert(name, path.clone());
            }
            self.module.paths.push(path);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let is_test = item.attrs.iter().any(|attr| attr.path().is_ident("cfg") && quote_text(attr).contains("test"));
        if !is_test {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if item.trait_.is_none()
            && let syn::Type::Path(self_type) = &*item.self_ty
            && self_type.qself.is_none()
        {
            self.module.impls.push(self_type.path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_item_impl(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.module.paths.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        if let Ok(expressions) =
            mac.parse_body_with(syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        {
            for expression in &expressions {
                self.visit_expr(expression);
            }
        }
    }
}

fn quote_text(attr: &syn::Attribute) -> String {
    match &attr.meta {
        syn::Meta::List(list) => list.tokens.to_string(),
        _ => String::new(),
    }
}

/// The leaves of a `use` tree: each full path, and the name it brings into scope (none for
/// a glob, whose path is its module).
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, leaves: &mut Vec<(Vec<String>, Option<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, leaves);
            prefix.pop();
        }
        syn::UseTree::Name(n) => leaf(prefix, &n.ident, &n.ident, leaves),
        syn::UseTree::Rename(r) => leaf(prefix, &r.ident, &r.rename, leaves),
        syn::UseTree::Glob(_) => leaves.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|item| flatten(item, prefix, leaves)),
    }
}

fn leaf(prefix: &[String], ident: &syn::Ident, name: &syn::Ident, leaves: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix.to_vec();
    if ident != "self" {
        path.push(ident.to_string());
    }
    let bound = if ident == "self" { prefix.last().cloned() } else { Some(name.to_string()) };
    leaves.push((path, bound));
}

/// A cycle between the subtrees of one folder: `folder` is the parent module (`crate` for the
/// top level), `members` its children whose files import each other in a loop.
#[derive(Debug)]
pub(crate) struct FolderCycle {
    pub(crate) folder: String,
    pub(crate) members: Vec<String>,
}

/// Every cycle between sibling subtrees: for each module with children, its files are grouped
/// by the child they sit under, and an import from one group into another is an edge between
/// the two children. A folder whose children import each other in a loop does not stand
/// above what it uses, even when no two files form a cycle.
pub(crate) fn folder_cycles(krate: &Crate) -> Vec<FolderCycle> {
    let edges = krate.edges();
    let folders: BTreeSet<ModulePath> =
        krate.modules.keys().filter(|path| !path.is_empty()).map(|path| path[..path.len() - 1].to_vec()).collect();
    let mut found = Vec::new();
    for folder in &folders {
        let child_of = |path: &ModulePath| -> Option<ModulePath> {
            (path.len() > folder.len() && path.starts_with(folder)).then(|| path[..=folder.len()].to_vec())
        };
        let mut lifted: BTreeMap<&ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
        let children: Vec<ModulePath> =
            krate.modules.keys().filter(|p| p.len() == folder.len() + 1 && p.starts_with(folder)).cloned().collect();
        for (from, targets) in &edges {
            let Some(from_child) = child_of(from) else { continue };
            let key = children.iter().find(|c| **c == from_child).expect("a child module");
            let entry = lifted.entry(key).or_default();
            entry.extend(targets.iter().filter_map(&child_of).filter(|t| *t != from_child));
        }
        for child in &children {
            lifted.entry(child).or_default();
        }
        for group in groups(&lifted) {
            found.push(FolderCycle { folder: display(folder), members: group });
        }
    }
    found
}

/// The import edges between two sibling subtrees, as `from -> to (path)` lines.
pub(crate) fn folder_cycle_edges(krate: &Crate, cycle: &FolderCycle) -> Vec<String> {
    let member = |path: &ModulePath| {
        cycle.members.iter().find(|m| {
            let m: Vec<&str> = m.split("::").collect();
            path.len() >= m.len() && path.iter().zip(&m).all(|(a, b)| a == b)
        })
    };
    let mut lines = Vec::new();
    for (from, module) in &krate.modules {
        let Some(from_member) = member(from) else { continue };
        for path in &module.paths {
            let Some(to) = krate.resolve(from, path, 0) else { continue };
            if let Some(to_member) = member(&to)
                && to_member != from_member
            {
                lines.push(format!("{} -> {} ({})", display(from), display(&to), path.join("::")));
            }
        }
    }
    lines.dedup();
    lines
}
