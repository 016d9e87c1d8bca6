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
/// # Errors
///
/// When reading fails, or as soon as `each` fails.
pub(crate) fn for_each_line(
    reader: impl Read,
    name: &str,
    mut each: impl FnMut(u64, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut reader = BufReader::with_capacity(BUFFER_BYTES, reader);
    let mut line = Vec::with_capacity(4096);
    let mut number = 0;
    loop {
        line.clear();
        let read =
            reader.read_until(b'\n', &mut line).with_context(|| format!("cannot read {name} after line {number}"))?;
        if read == 0 {
            return Ok(number);
        }
        number += 1;
        each(number, trim_line_break(&line))?;
    }
}

fn trim_line_break(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
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
}
