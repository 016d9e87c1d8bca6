//! Where the log comes from, and reading it line by line without a `String` per line.

use super::progress::Progress;
use anyhow::Context;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

/// Read buffer size: large, so a gigabyte log costs few system calls.
const BUFFER_BYTES: usize = 1 << 20;

/// A log file, or standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    File(PathBuf),
    Stdin,
}

impl Input {
    /// The input the `LOG` argument names (`-` or none: standard input).
    pub(crate) fn from_arg(log: Option<&PathBuf>) -> Input {
        match log {
            Some(path) if path.as_os_str() != "-" => Input::File(path.clone()),
            _ => Input::Stdin,
        }
    }

    /// The input's name in messages.
    pub(crate) fn name(&self) -> String {
        match self {
            Input::File(path) => path.display().to_string(),
            Input::Stdin => "standard input".to_owned(),
        }
    }

    /// Opens the input, with a progress bar labelled `label`.
    pub(crate) fn open(&self, label: &'static str) -> anyhow::Result<Progress<Box<dyn Read>>> {
        match self {
            Input::File(path) => {
                let file = File::open(path).with_context(|| format!("cannot open the log {}", path.display()))?;
                let len = file.metadata().ok().map(|metadata| metadata.len());
                Ok(Progress::new(Box::new(file), len, label))
            }
            Input::Stdin => Ok(Progress::new(Box::new(std::io::stdin().lock()), None, label)),
        }
    }
}

/// Calls `each` with every line of `reader` (from 1, without its line break); returns the
/// number of lines.
///
/// A line that lies whole in the read buffer is passed from there, without a copy; only a
/// line cut by the buffer's end is gathered in `carried`.
///
/// # Errors
///
/// When reading fails, or as soon as `each` fails.
pub(crate) fn for_each_line(
    reader: impl Read,
    name: &str,
    mut each: impl FnMut(u64, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut reader = BufReader::with_capacity(BUFFER_BYTES, reader);
    let mut carried = Vec::new();
    let mut number = 0;
    loop {
        let buffer = reader.fill_buf().with_context(|| format!("cannot read {name} after line {number}"))?;
        if buffer.is_empty() {
            if !carried.is_empty() {
                number += 1;
                each(number, trim_line_break(&carried))?;
            }
            return Ok(number);
        }
        let consumed = match memchr::memchr(b'\n', buffer) {
            Some(end) if carried.is_empty() => {
                number += 1;
                each(number, trim_line_break(&buffer[..end]))?;
                end + 1
            }
            Some(end) => {
                carried.extend_from_slice(&buffer[..end]);
                number += 1;
                each(number, trim_line_break(&carried))?;
                carried.clear();
                end + 1
            }
            None => {
                carried.extend_from_slice(buffer);
                buffer.len()
            }
        };
        reader.consume(consumed);
    }
}

fn trim_line_break(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_without_their_breaks() {
        let mut seen = Vec::new();
        let count = for_each_line(&b"a\r\n\nb"[..], "test", |number, line| {
            seen.push((number, line.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(count, 3);
        assert_eq!(seen, [(1, b"a".to_vec()), (2, Vec::new()), (3, b"b".to_vec())]);
    }

    #[test]
    fn lines_cut_by_the_buffer_end_are_whole() {
        let text: String = (0..300_000).map(|n| format!("line {n}\n")).collect();
        let mut count = 0;
        for_each_line(text.as_bytes(), "test", |number, line| {
            assert_eq!(line, format!("line {}", number - 1).as_bytes());
            count += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(count, 300_000);
    }
}
