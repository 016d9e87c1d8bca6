//! The README's "Replay traffic" commands, run as written from the repository's root: one
//! form for each (`cargo run --release -- …`, here the built binary), every file they name
//! in the checkout, and each one succeeding (issue 46.5: they mixed `cargo run` with an
//! installed `sluice`, and the last named files that do not exist).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// How every command of the section begins.
const FORM: [&str; 4] = ["cargo", "run", "--release", "--"];

/// A command of the README: its arguments after `--`, and the file it redirects to
/// standard input, if any.
#[derive(Debug)]
struct Written {
    args: Vec<String>,
    stdin: Option<String>,
}

impl Written {
    /// The files the command reads: its configuration, its standard input, and the log a
    /// replay names last.
    fn inputs(&self) -> Vec<&str> {
        let config = self.args.iter().position(|arg| arg == "--config").map(|at| self.args[at + 1].as_str());
        let log = (self.args[0] == "replay").then(|| self.args.last().unwrap().as_str());
        config.into_iter().chain(self.stdin.as_deref()).chain(log).collect()
    }
}

/// The shell lines of the README's "Replay traffic" section (up to the next `## `).
fn written_commands() -> Vec<Written> {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let section = readme.split("### Replay traffic").nth(1).expect("a \"Replay traffic\" section");
    let section = section.split("\n## ").next().unwrap();
    let mut in_shell = false;
    let mut commands = Vec::new();
    for line in section.lines() {
        if line.starts_with("```") {
            in_shell = line == "```sh";
            continue;
        }
        if in_shell {
            commands.push(parse(line));
        }
    }
    commands
}

/// One shell line: [`FORM`], arguments without quotes, and an optional `< FILE`.
fn parse(line: &str) -> Written {
    assert!(!line.contains(['"', '\'', '\\', '|']), "a plain command: {line}");
    let (command, stdin) = match line.split_once(" < ") {
        Some((command, file)) => (command, Some(file.trim().to_owned())),
        None => (line, None),
    };
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[..FORM.len()], FORM, "every command in one form: {line}");
    Written { args: words[FORM.len()..].iter().map(|&word| word.to_owned()).collect(), stdin }
}

#[test]
fn the_readmes_replay_commands_run_as_written_from_a_fresh_checkout() {
    let commands = written_commands();
    let subcommands: Vec<&str> = commands.iter().map(|command| command.args[0].as_str()).collect();
    assert_eq!(subcommands, ["simulate", "replay", "replay", "replay", "replay"], "{commands:?}");
    let report = std::env::temp_dir().join(format!("sluice-readme-{}-report.html", std::process::id()));
    for command in &commands {
        for input in command.inputs() {
            assert!(Path::new(ROOT).join(input).is_file(), "{input}, named by {command:?}, is not in the checkout");
        }
        // The report goes to a temporary file rather than into the checkout.
        let args =
            command.args.iter().map(|arg| if arg == "report.html" { report.clone() } else { PathBuf::from(arg) });
        let stdin = match &command.stdin {
            Some(file) => Stdio::from(std::fs::File::open(Path::new(ROOT).join(file)).unwrap()),
            None => Stdio::null(),
        };
        let output = Command::new(env!("CARGO_BIN_EXE_sluice")).current_dir(ROOT).args(args).stdin(stdin).output();
        let output = output.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{command:?} failed: {stderr}");
        assert!(!output.stdout.is_empty(), "{command:?} printed nothing: {stderr}");
        assert!(!stderr.contains("bad line"), "{command:?} read bad lines: {stderr}");
    }
    assert!(std::fs::metadata(&report).unwrap().len() > 0, "the report was written");
    let _ = std::fs::remove_file(&report);
}
