//! `sluice replay`: real access logs through candidate policies, with the log's own times.
//!
//! Each candidate runs on an embedded store of its own whose clock never moves (so no
//! state is dropped early), with each request decided at its logged time, or at the latest
//! time seen when it is older ([`timeline`]). The log streams through once; memory grows
//! with distinct keys, not lines. An HTML report reads a file log a second time to draw the
//! top keys' timelines ([`key_timelines`]).

mod combined;
mod filter;
pub(crate) mod format;
mod input;
mod json_lines;
mod key_timelines;
mod pass;
mod progress;
mod record;
mod report;
mod series;
mod summary;
mod tally;
mod time_text;
mod timeline;

use crate::cli::ReplayArgs;
use crate::config::service_file::ServiceConfig;
use filter::LineFilter;
use format::Parser;
use input::Input;
use pass::Replayed;
use sluice_core::Limit;
use std::io::Write;
use std::process::ExitCode;
use summary::{PolicySummary, Summary, TOP_KEYS};

/// Runs `sluice replay`: the summary on standard output, the report when asked.
///
/// # Errors
///
/// When the configuration, the options or the log cannot be used (bad lines are not errors).
pub(crate) fn run(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let config = ServiceConfig::load(&args.config)?;
    let limits = crate::offline::simulate::select(&config, &args.policies)?;
    let mut parser = Parser::from_args(args).map_err(anyhow::Error::msg)?;
    let filter = LineFilter::from_args(args).map_err(anyhow::Error::msg)?;
    let input = Input::from_arg(args.log.as_ref());
    let replayed = pass::replay(&input, &mut parser, &filter, &limits)?;
    let summary = summarize(args, &input, &parser, &filter, &limits, &replayed);
    if let Some(path) = &args.report {
        write_report(path, &input, args, &filter, &limits, &replayed, &summary)?;
        // On standard error: standard output is the summary (JSON with `--json`).
        let shown = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        eprintln!("report written to {} (open it in a browser)", shown.display());
    }
    print(&summary, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// The results of a replay.
fn summarize(
    args: &ReplayArgs,
    input: &Input,
    parser: &Parser,
    filter: &LineFilter,
    limits: &[Limit],
    replayed: &Replayed,
) -> Summary {
    let span = replayed.timeline.span();
    let offset = replayed.offset.unwrap_or(time_text::UtcOffset::UTC);
    Summary {
        input: input.name(),
        format: args.format.to_string(),
        key: parser.key_name(args),
        lines: replayed.lines,
        requests: replayed.requests,
        bad_lines: replayed.bad_lines,
        first_bad_lines: replayed.first_bad_lines.clone(),
        filter: filter.describe(),
        filtered_out: replayed.filtered_out,
        late_lines: replayed.timeline.late(),
        utc_offset: offset.to_string(),
        first_time: span.map(|(first, _)| time_text::format_rfc3339(first, offset)),
        last_time: span.map(|(_, last)| time_text::format_rfc3339(last, offset)),
        policies: limits
            .iter()
            .zip(&replayed.tallies)
            .map(|(limit, tally)| PolicySummary::of(limit, tally, &replayed.keys, offset))
            .collect(),
    }
}

/// Writes the HTML report, with the top keys' timelines when the log can be read again.
fn write_report(
    path: &std::path::Path,
    input: &Input,
    args: &ReplayArgs,
    filter: &LineFilter,
    limits: &[Limit],
    replayed: &Replayed,
    summary: &Summary,
) -> anyhow::Result<()> {
    let layouts: Vec<&series::Series> = replayed.tallies.iter().map(|tally| &tally.series).collect();
    let timelines = match input {
        Input::Stdin => None,
        Input::File(_) => {
            let top: Vec<Vec<Box<[u8]>>> = replayed
                .tallies
                .iter()
                .map(|tally| {
                    let ids: Vec<usize> = tally.top_limited(TOP_KEYS).iter().map(|&(id, _)| id).collect();
                    replayed.keys.names(&ids)
                })
                .collect();
            let mut parser = Parser::from_args(args).map_err(anyhow::Error::msg)?;
            Some(key_timelines::draw(input, &mut parser, filter, limits, &top, &layouts)?)
        }
    };
    report::write(path, summary, &layouts, timelines.as_ref())
}

/// Prints the summary as text or JSON.
fn print(summary: &Summary, json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, summary)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{summary}")?;
    }
    stdout.flush()?;
    Ok(())
}
