//! Where an algorithm's parameters are read from: a policy in a configuration file
//! (`crate::config`), or a limit's definition (`Limit::from_definition`). Each algorithm
//! reads its parameters once, in its [`ReadParameters::read`], from either source, by the
//! names its [`Algorithm::parameters`](super::Algorithm::parameters) writes them under.

use super::PolicyError;
use std::time::Duration;

/// A source of one policy's parameters, by name.
///
/// A configuration file names a duration `window` and writes it with a unit (`15m`); a
/// definition names it `window_us` and writes whole microseconds, as `parameters()` does.
pub(crate) trait ParameterSource {
    /// A whole number of at least `min`; `default` when the source may omit it and does.
    /// `None` when it cannot be read (and the source has recorded why).
    fn count(&mut self, name: &'static str, min: u64, default: Option<u64>) -> Option<u64>;

    /// A required duration.
    fn duration(&mut self, name: &'static str) -> Option<Duration>;

    /// A duration that may also be written as whole microseconds (an offset), 0 when absent.
    fn offset(&mut self, name: &'static str) -> Option<Duration>;

    /// The index in `words` of the word given; `default` when absent (`None`: required).
    fn word(&mut self, name: &'static str, words: &[&'static str], default: Option<usize>) -> Option<usize>;
}

/// An algorithm that can be read from a [`ParameterSource`].
pub(crate) trait ReadParameters: Sized {
    /// Reads every parameter, then builds the algorithm: `None` when a parameter could not
    /// be read, else what the constructor says. Reads every parameter before giving up, so
    /// that a configuration reports all its problems and its unknown fields at once.
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>>;
}

/// One of the choices `all` (such as the sliding log's variants), by its configuration
/// word; `T::default()` when absent.
pub(crate) fn choice<T: Copy + Default + PartialEq>(
    source: &mut dyn ParameterSource,
    name: &'static str,
    all: &[T],
    word: fn(T) -> &'static str,
) -> Option<T> {
    let words: Vec<&'static str> = all.iter().map(|&choice| word(choice)).collect();
    let default = all.iter().position(|&choice| choice == T::default()).unwrap_or(0);
    source.word(name, &words, Some(default)).and_then(|index| all.get(index).copied())
}

/// A source that gives nothing and notes every name asked: the fields an algorithm reads.
#[derive(Debug, Default)]
pub(crate) struct FieldNames(pub(crate) Vec<&'static str>);

impl ParameterSource for FieldNames {
    fn count(&mut self, name: &'static str, _: u64, _: Option<u64>) -> Option<u64> {
        self.0.push(name);
        None
    }

    fn duration(&mut self, name: &'static str) -> Option<Duration> {
        self.0.push(name);
        None
    }

    fn offset(&mut self, name: &'static str) -> Option<Duration> {
        self.0.push(name);
        None
    }

    fn word(&mut self, name: &'static str, _: &[&'static str], _: Option<usize>) -> Option<usize> {
        self.0.push(name);
        None
    }
}
