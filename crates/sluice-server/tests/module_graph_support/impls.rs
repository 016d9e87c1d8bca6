//! Where each type's inherent impls are written, against where the type is defined.

use super::{Crate, display};

/// Every inherent `impl` block written outside the module (file) that defines its type, as
/// `module: impl Type (defined in module)`. A type's name is followed through the module's
/// imports (and re-exports) to the module that defines it; a name not imported is the
/// module's own (or one a macro invoked there defines).
pub(crate) fn impls_away_from_their_type(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for (from, module) in &krate.modules {
        for written in &module.impls {
            let own = written.len() == 1 && !module.imports.contains_key(&written[0]);
            let Some(defined_in) = (if own { Some(from.clone()) } else { krate.resolve(from, written, 0) }) else {
                continue;
            };
            if defined_in != *from {
                let name = written.join("::");
                found.push(format!("{}: impl {name} (defined in {})", display(from), display(&defined_in)));
            }
        }
    }
    found.dedup();
    found
}
