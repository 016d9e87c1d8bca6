//! A limit read back from its [`definition`](crate::Limit::definition), so that state saved
//! with a limit made at run time (not in any configuration) can be matched to it again.

use crate::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, Limit, LimitId, Policy, SlidingLog, SlidingLogVariant,
    SlidingWindow, TokenBucket, TokenBucketSettings,
};
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
        let policy = reader.policy(algorithm)?;
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

    /// The value of the next line, which must be `field=value`.
    fn field(&mut self, field: &str) -> Result<&'a str, DefinitionError> {
        let line = self.line()?;
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix('='))
            .ok_or_else(|| DefinitionError(format!("expected the field {field}, found {line:?}")))
    }

    fn number(&mut self, field: &str) -> Result<u64, DefinitionError> {
        let value = self.field(field)?;
        value.parse().map_err(|_| DefinitionError(format!("{field}: not a whole number: {value:?}")))
    }

    fn micros(&mut self, field: &str) -> Result<Duration, DefinitionError> {
        self.number(field).map(Duration::from_micros)
    }

    fn choice<T: Copy>(&mut self, field: &str, all: &[T], name: fn(T) -> &'static str) -> Result<T, DefinitionError> {
        let value = self.field(field)?;
        all.iter()
            .copied()
            .find(|choice| name(*choice) == value)
            .ok_or_else(|| DefinitionError(format!("{field}: unknown choice {value:?}")))
    }

    fn policy(&mut self, algorithm: &str) -> Result<Policy, DefinitionError> {
        let invalid = |error: crate::PolicyError| DefinitionError(error.to_string());
        let policy: Policy = match algorithm {
            "sliding_log" => {
                let (limit, window) = (self.number("limit")?, self.micros("window_us")?);
                let variant = self.choice("variant", &SlidingLogVariant::ALL, SlidingLogVariant::name)?;
                SlidingLog::new(limit, window, variant).map_err(invalid)?.into()
            }
            "fixed_window" => {
                let (limit, window) = (self.number("limit")?, self.micros("window_us")?);
                let alignment = self.choice("alignment", &Alignment::ALL, Alignment::name)?;
                let offset = self.micros("offset_us")?;
                FixedWindow::new(limit, window, alignment, offset).map_err(invalid)?.into()
            }
            "sliding_window" => {
                let (limit, window) = (self.number("limit")?, self.micros("window_us")?);
                SlidingWindow::new(limit, window, self.number("buckets")?).map_err(invalid)?.into()
            }
            "token_bucket" => {
                let capacity = self.number("capacity")?;
                let refill_amount = self.number("refill_amount")?;
                let refill_interval = self.micros("refill_interval_us")?;
                TokenBucket::new(TokenBucketSettings { capacity, refill_amount, refill_interval })
                    .map_err(invalid)?
                    .into()
            }
            "leaky_bucket" => {
                let (interval, burst) = (self.micros("interval_us")?, self.number("burst")?);
                let mode = self.choice("mode", &LeakMode::ALL, LeakMode::name)?;
                LeakyBucket::new(interval, burst, mode).map_err(invalid)?.into()
            }
            other => return Err(DefinitionError(format!("unknown algorithm {other:?}"))),
        };
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
