//! Which log lines `sluice replay` replays: `--path`, `--path-regex`, `--method` and
//! `--status` select requests, so that "the login policy on login requests" needs no `grep`
//! (which would also lose the report's second pass). Kinds combine with *and*; the values
//! of one repeated option with *or*.

use super::record::Record;
use crate::cli::ReplayArgs;
use regex::bytes::Regex;

/// The selection the options make; an empty one admits every line.
#[derive(Debug, Default)]
pub(crate) struct LineFilter {
    /// The path (the request target before any `?`) starts with one of these.
    path_prefixes: Vec<String>,
    /// The whole request target (path and query) matches.
    path_regex: Option<Regex>,
    /// One of these methods, in any case.
    methods: Vec<String>,
    /// One of these statuses or classes.
    statuses: Vec<StatusMatch>,
}

/// `--status 404` or `--status 4xx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StatusMatch {
    Exact(u16),
    Class(u16),
}

impl LineFilter {
    /// The filter `args` ask for.
    ///
    /// # Errors
    ///
    /// When a regex or status does not parse, or the format has no requests to select
    /// (a trace).
    pub(crate) fn from_args(args: &ReplayArgs) -> Result<LineFilter, String> {
        let path_regex = args
            .path_regex
            .as_deref()
            .map(|pattern| Regex::new(pattern).map_err(|error| format!("--path-regex `{pattern}`: {error}")))
            .transpose()?;
        let statuses = args.statuses.iter().map(|text| StatusMatch::parse(text)).collect::<Result<_, _>>()?;
        let filter = LineFilter {
            path_prefixes: args.paths.clone(),
            path_regex,
            methods: args.methods.iter().map(|method| method.to_ascii_uppercase()).collect(),
            statuses,
        };
        if !filter.is_empty() && args.format == crate::cli::FormatName::Trace {
            return Err("--path, --path-regex, --method and --status select requests of access logs; \
                        a trace line has none of these"
                .to_owned());
        }
        Ok(filter)
    }

    /// True when the filter admits every line.
    pub(crate) fn is_empty(&self) -> bool {
        self.path_prefixes.is_empty()
            && self.path_regex.is_none()
            && self.methods.is_empty()
            && self.statuses.is_empty()
    }

    /// Whether `record`'s request is selected.
    pub(crate) fn admits(&self, record: &Record<'_>) -> bool {
        let target = &*record.target;
        let path = target.split(|&byte| byte == b'?').next().unwrap_or_default();
        (self.path_prefixes.is_empty() || self.path_prefixes.iter().any(|prefix| path.starts_with(prefix.as_bytes())))
            && self.path_regex.as_ref().is_none_or(|regex| regex.is_match(target))
            && (self.methods.is_empty()
                || self.methods.iter().any(|method| method.as_bytes().eq_ignore_ascii_case(&record.method)))
            && (self.statuses.is_empty()
                || record.status.is_some_and(|status| self.statuses.iter().any(|wanted| wanted.admits(status))))
    }

    /// The filter in words, for the summary; `None` when it admits every line.
    pub(crate) fn describe(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !self.path_prefixes.is_empty() {
            parts.push(format!("path starts with {}", self.path_prefixes.join(" or ")));
        }
        if let Some(regex) = &self.path_regex {
            parts.push(format!("target matches /{regex}/"));
        }
        if !self.methods.is_empty() {
            parts.push(format!("method {}", self.methods.join(" or ")));
        }
        if !self.statuses.is_empty() {
            let statuses: Vec<String> = self.statuses.iter().map(StatusMatch::to_string).collect();
            parts.push(format!("status {}", statuses.join(" or ")));
        }
        Some(parts.join(", "))
    }
}

impl StatusMatch {
    fn parse(text: &str) -> Result<StatusMatch, String> {
        let bad = || format!("--status `{text}`: use a status (404) or a class (4xx)");
        match text.as_bytes() {
            [class @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => Ok(StatusMatch::Class(u16::from(class - b'0'))),
            [b'1'..=b'5', b'0'..=b'9', b'0'..=b'9'] => text.parse().map(StatusMatch::Exact).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }

    fn admits(self, status: u16) -> bool {
        match self {
            StatusMatch::Exact(wanted) => status == wanted,
            StatusMatch::Class(class) => status / 100 == class,
        }
    }
}

impl std::fmt::Display for StatusMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusMatch::Exact(status) => write!(f, "{status}"),
            StatusMatch::Class(class) => write!(f, "{class}xx"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Timestamp;
    use std::borrow::Cow;

    fn record<'a>(method: &'a str, target: &'a str, status: Option<u16>) -> Record<'a> {
        Record {
            time: Timestamp::EPOCH,
            key: Cow::Borrowed(b"k"),
            cost: 1,
            method: Cow::Borrowed(method.as_bytes()),
            target: Cow::Borrowed(target.as_bytes()),
            status,
            offset: None,
        }
    }

    fn filter(paths: &[&str], regex: Option<&str>, methods: &[&str], statuses: &[&str]) -> LineFilter {
        LineFilter {
            path_prefixes: paths.iter().map(|path| (*path).to_owned()).collect(),
            path_regex: regex.map(|regex| Regex::new(regex).unwrap()),
            methods: methods.iter().map(|method| method.to_ascii_uppercase()).collect(),
            statuses: statuses.iter().map(|status| StatusMatch::parse(status).unwrap()).collect(),
        }
    }

    #[test]
    fn kinds_combine_with_and_values_with_or() {
        let login = filter(&["/login", "/signin"], None, &["post"], &["2xx", "401"]);
        assert!(login.admits(&record("POST", "/login?next=/", Some(200))));
        assert!(login.admits(&record("post", "/signin", Some(401))));
        assert!(!login.admits(&record("GET", "/login", Some(200))), "method");
        assert!(!login.admits(&record("POST", "/api/login", Some(200))), "a prefix of the path");
        assert!(!login.admits(&record("POST", "/login", Some(500))), "status");
        assert!(!login.admits(&record("POST", "/login", None)), "a status is needed");
        assert!(
            !filter(&["/login"], None, &[], &[]).admits(&record("GET", "/x?/login", None)),
            "the query is not the path"
        );
    }

    #[test]
    fn the_regex_sees_the_whole_target() {
        let search = filter(&[], Some(r"^/search\?q="), &[], &[]);
        assert!(search.admits(&record("GET", "/search?q=rust", None)));
        assert!(!search.admits(&record("GET", "/search", None)));
        assert!(filter(&[], None, &[], &[]).admits(&record("", "", None)), "no filter admits every line");
    }

    #[test]
    fn statuses_are_exact_or_a_class() {
        assert_eq!(StatusMatch::parse("4xx"), Ok(StatusMatch::Class(4)));
        assert_eq!(StatusMatch::parse("404"), Ok(StatusMatch::Exact(404)));
        for bad in ["4", "40x", "6xx", "abc", "1000", ""] {
            assert!(StatusMatch::parse(bad).unwrap_err().contains("a class (4xx)"), "{bad}");
        }
    }
}
