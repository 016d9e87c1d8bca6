//! The self-contained HTML report: one file with inline CSS, JavaScript and SVG, the data
//! embedded as JSON, so it opens anywhere without a network.

use super::key_timelines::Timelines;
use super::series::Series;
use super::summary::Summary;
use anyhow::Context;
use serde::Serialize;
use std::path::Path;

const TEMPLATE: &str = include_str!("report.html");
const DATA_SLOT: &str = "__SLUICE_REPORT_DATA__";

/// Why the key timelines are missing, shown in the report.
const NO_TIMELINES: &str =
    "Timelines of the top keys need a second pass over the log: give a file instead of standard input.";

/// Everything the page draws.
#[derive(Debug, Serialize)]
struct Data<'a> {
    summary: &'a Summary,
    charts: Vec<Charts<'a>>,
    keys_note: &'static str,
}

/// One policy's charts: its series, and its top keys' (absent when they were not drawn).
#[derive(Debug, Serialize)]
struct Charts<'a> {
    series: &'a Series,
    keys: Option<&'a [Series]>,
}

/// Writes the report to `path`.
///
/// # Errors
///
/// When the file cannot be written.
pub(crate) fn write(
    path: &Path,
    summary: &Summary,
    series: &[&Series],
    keys: Option<&Timelines>,
) -> anyhow::Result<()> {
    std::fs::write(path, render(summary, series, keys)?)
        .with_context(|| format!("cannot write the report {}", path.display()))
}

/// The page's HTML.
fn render(summary: &Summary, series: &[&Series], keys: Option<&Timelines>) -> anyhow::Result<String> {
    let charts = series
        .iter()
        .enumerate()
        .map(|(index, series)| Charts { series, keys: keys.map(|keys| keys[index].as_slice()) })
        .collect();
    let json = serde_json::to_string(&Data { summary, charts, keys_note: NO_TIMELINES })?;
    // Inside <script>, `</script>` in a key would end the element: `<` is escaped in JSON.
    Ok(TEMPLATE.replace(DATA_SLOT, &json.replace('<', "\\u003c")))
}
