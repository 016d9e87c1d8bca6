//! A progress bar of bytes read, on standard error when it is a terminal (none otherwise).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::{self, IsTerminal, Read};

/// A reader that moves a progress bar by the bytes it reads.
#[derive(Debug)]
pub(crate) struct Progress<R> {
    inner: R,
    bar: ProgressBar,
}

impl<R: Read> Progress<R> {
    /// Wraps `inner`, whose length is `len` bytes when known; `label` names the pass.
    pub(crate) fn new(inner: R, len: Option<u64>, label: &'static str) -> Progress<R> {
        Progress { inner, bar: bar(len, label) }
    }

    /// Removes the bar from the terminal.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn bar(len: Option<u64>, label: &'static str) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let Some(len) = len else {
        let spinner = ProgressBar::new_spinner();
        spinner.set_style(style("{spinner} {msg} {bytes} ({bytes_per_sec})"));
        spinner.set_message(label);
        return spinner;
    };
    let bar = ProgressBar::new(len);
    bar.set_style(style("{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)"));
    bar.set_message(label);
    bar
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.bar.inc(read as u64);
        Ok(read)
    }
}
