//! A limit read back from its [`definition`](crate::Limit::definition), so that state saved
//! with a limit made at run time (not in any configuration) can be matched to it again.

use crate::algorithm::source::ParameterSource;
use crate::{Limit, LimitId, Policy};
use std::time::Duration;

/// A definition that does not describe a valid limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a limit definition: {0}")]
pub struct DefinitionError(String);

impl Limit {
    /// The limit whose [`definition`](Limit::definition) is `text`, exactly: parsing then
    /// writing it back gives the same text, so the limit has the same [`LimitId`].
    ///
    /// # Errors
    ///
    /// When `text` is not the definition of a valid limit in the current scheme.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::{FixedWindow, Alignment, Limit};
    /// use std::time::Duration;
    ///
    /// let window = FixedWindow::new(10, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO)?;
    /// let limit = Limit::new("per_minute", window);
    /// assert_eq!(Limit::from_definition(&limit.definition())?, limit);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_definition(text: &str) -> Result<Limit, DefinitionError> {
        let mut reader = DefinitionReader { rest: text };
        reader.expect_line(LimitId::SCHEME)?;
        let name = reader.name()?;
        let algorithm = reader.field("algorithm")?;
        let algorithm = Policy::ALGORITHMS
            .iter()
            .position(|known| *known == algorithm)
            .ok_or_else(|| DefinitionError(format!("unknown algorithm {algorithm:?}")))?;
        let mut lines = DefinitionLines { reader: &mut reader, problem: None };
        let built = Policy::read(algorithm, &mut lines);
        let policy = match (built, lines.problem) {
            (_, Some(problem)) => return Err(problem),
            (None, None) => return Err(DefinitionError("a parameter is missing".to_owned())),
            (Some(built), None) => built.map_err(|error| DefinitionError(error.to_string()))?,
        };
        if !reader.rest.is_empty() {
            return Err(DefinitionError(format!("unexpected text after the parameters: {:?}", reader.rest)));
        }
        let limit = Limit::new(name, policy);
        if limit.definition() != text {
            return Err(DefinitionError("the parameters are not written as this version writes them".to_owned()));
        }
        Ok(limit)
    }
}

/// A cursor over a definition's lines.
struct DefinitionReader<'a> {
    rest: &'a str,
}

impl<'a> DefinitionReader<'a> {
    fn expect_line(&mut self, line: &str) -> Result<(), DefinitionError> {
        let found = self.line()?;
        if found != line {
            return Err(DefinitionError(format!("expected {line:?}, found {found:?}")));
        }
        Ok(())
    }

    fn line(&mut self) -> Result<&'a str, DefinitionError> {
        let (line, rest) =
            self.rest.split_once('\n').ok_or_else(|| DefinitionError("a line without its end".to_owned()))?;
        self.rest = rest;
        Ok(line)
    }

    /// `name=<bytes>:<name>`, the name possibly holding any character, newlines included.
    fn name(&mut self) -> Result<&'a str, DefinitionError> {
        let after = self.rest.strip_prefix("name=").ok_or_else(|| DefinitionError("no name".to_owned()))?;
        let (len, after) = after.split_once(':').ok_or_else(|| DefinitionError("no name length".to_owned()))?;
        let len: usize = len.parse().map_err(|_| DefinitionError(format!("bad name length {len:?}")))?;
        let name = after.get(..len).ok_or_else(|| DefinitionError("a name longer than the text".to_owned()))?;
        self.rest =
            after[len..].strip_prefix('\n').ok_or_else(|| DefinitionError("no line end after the name".to_owned()))?;
        Ok(name)
    }

    /// True when the next line is `field=…`.
    fn next_is(&self, field: &str) -> bool {
        self.rest.strip_prefix(field).is_some_and(|rest| rest.starts_with('='))
    }

    /// The value of the next line, which must be `field=value`.
    fn field(&mut self, field: &str) -> Result<&'a str, DefinitionError> {
        let line = self.line()?;
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix('='))
            .ok_or_else(|| DefinitionError(format!("expected the field {field}, found {line:?}")))
    }
}

/// A definition's parameter lines, read in the order [`Algorithm::parameters`] writes them.
/// The first problem ends the reading.
struct DefinitionLines<'r, 'a> {
    reader: &'r mut DefinitionReader<'a>,
    problem: Option<DefinitionError>,
}

impl DefinitionLines<'_, '_> {
    /// The next line's value, which must be `field=value`.
    fn value(&mut self, field: &str) -> Option<&str> {
        if self.problem.is_some() {
            return None;
        }
        self.reader.field(field).map_err(|problem| self.problem = Some(problem)).ok()
    }

    fn number(&mut self, field: &str) -> Option<u64> {
        let value = self.value(field)?;
        let number = value.parse().map_err(|_| DefinitionError(format!("{field}: not a whole number: {value:?}")));
        number.map_err(|problem| self.problem = Some(problem)).ok()
    }

    fn micros(&mut self, name: &str) -> Option<Duration> {
        self.number(&format!("{name}_us")).map(Duration::from_micros)
    }
}

impl ParameterSource for DefinitionLines<'_, '_> {
    fn count(&mut self, name: &'static str, _: u64, _: Option<u64>) -> Option<u64> {
        self.number(name)
    }

    fn duration(&mut self, name: &'static str) -> Option<Duration> {
        self.micros(name)
    }

    fn offset(&mut self, name: &'static str) -> Option<Duration> {
        self.micros(name)
    }

    /// A choice with a default may be left out (a definition writes it only when it is not
    /// the default: see [`Algorithm::parameters`](crate::Algorithm::parameters)).
    fn word(&mut self, name: &'static str, words: &[&'static str], default: Option<usize>) -> Option<usize> {
        if let Some(default) = default
            && self.problem.is_none()
            && !self.reader.next_is(name)
        {
            return Some(default);
        }
        let value = self.value(name)?.to_owned();
        let found = words.iter().position(|word| *word == value);
        if found.is_none() {
            self.problem = Some(DefinitionError(format!("{name}: unknown choice {value:?}")));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Alignment, FixedWindow, LeakMode, LeakyBucket, SlidingLog, SlidingLogVariant, SlidingWindow, TokenBucket,
        TokenBucketSettings,
    };
    use std::time::Duration;

    fn limits() -> Vec<Limit> {
        let second = Duration::from_secs(1);
        let bucket = TokenBucketSettings { capacity: 10, refill_amount: 2, refill_interval: second };
        vec![
            Limit::new("log", SlidingLog::new(5, second * 900, SlidingLogVariant::Attempts).unwrap()),
            Limit::new("odd name=1:\nx", SlidingLog::new(1, second, SlidingLogVariant::Accepted).unwrap()),
            Limit::new("window", FixedWindow::new(7, second * 60, Alignment::Anchored, Duration::ZERO).unwrap()),
            Limit::new("offset", FixedWindow::new(7, second * 3600, Alignment::Aligned, second * 60).unwrap()),
            Limit::new("counter", SlidingWindow::new(100, second * 60, 6).unwrap()),
            Limit::new("bucket", TokenBucket::new(bucket).unwrap()),
            Limit::new("gcra", LeakyBucket::new(Duration::from_millis(100), 3, LeakMode::Delay).unwrap()),
            Limit::new("é", LeakyBucket::new(Duration::from_micros(1), 0, LeakMode::NoDelay).unwrap()),
        ]
    }

    #[test]
    fn every_algorithm_reads_back_to_the_same_limit_and_id() {
        for limit in limits() {
            let read = Limit::from_definition(&limit.definition()).unwrap();
            assert_eq!((read.id(), &read), (limit.id(), &limit));
        }
    }

    #[test]
    fn anything_but_an_exact_definition_is_refused() {
        let text = limits()[0].definition();
        let broken = [
            text.replace("sluice.limit.v2", "sluice.limit.v1"),
            text.replace("limit=5", "limit=0"),
            text.replace("limit=5", "limit=05"),
            text.replace("attempts", "some"),
            text.replace("sliding_log", "sliding_logs"),
            text.replace("name=3:log", "name=4:log"),
            format!("{text}extra=1\n"),
            text.trim_end().to_owned(),
            String::new(),
        ];
        for text in broken {
            assert!(Limit::from_definition(&text).is_err(), "{text:?}");
        }
    }
}
