//! "Did you mean": the known name closest to a misspelt one.

/// The name of `known` closest to `name`, when it is close enough to be a typo (at most two
/// letters added, removed or changed, and fewer than half of `name`'s).
///
/// # Examples
///
/// ```
/// assert_eq!(sluice_config::closest("fixd_window", ["sliding_log", "fixed_window"]), Some("fixed_window"));
/// assert_eq!(sluice_config::closest("burst", ["limit", "window"]), None);
/// ```
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = 2.min(name.chars().count().saturating_sub(1) / 2);
    known
        .into_iter()
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .min()
        .filter(|&(distance, _)| distance <= most)
        .map(|(_, candidate)| candidate)
}

/// ` (did you mean `NAME`?)` when a name of `known` is close to `name`; empty otherwise.
pub fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, known).map_or_else(String::new, |known| format!(" (did you mean `{known}`?)"))
}

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &b_char) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(a_char != b_char);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{closest, edit_distance};

    #[test]
    fn distances_count_letters_added_removed_or_changed() {
        assert_eq!(edit_distance("limt", "limit"), 1);
        assert_eq!(edit_distance("window", "widnow"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn a_short_name_needs_a_close_match() {
        assert_eq!(closest("limt", ["limit", "window"]), Some("limit"));
        assert_eq!(closest("ab", ["cd"]), None, "two changes in two letters is not a typo");
        assert_eq!(closest("htp", ["http", "grpc"]), Some("http"));
    }
}
