//! What the accept loop does when `accept` fails or a connection finds no free slot: it
//! backs off, and logs rarely, so that running out of file descriptors (EMFILE) neither
//! spins the loop nor floods the log, while the connections already open are served.

pub(crate) use crate::runtime::rarely::Rarely;
use std::io;
use std::time::{Duration, Instant};

/// The pause after the first failed accept of a series; it doubles while accepts fail.
const FIRST_PAUSE: Duration = Duration::from_millis(10);

/// The longest pause between two accepts that fail.
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// The failed accepts of one listener.
#[derive(Debug)]
pub(crate) struct AcceptErrors {
    /// The listener, as logs name it (`HTTP`, `gRPC`).
    listener: &'static str,
    pause: Duration,
    log: Rarely,
}

impl AcceptErrors {
    /// No failure yet on `listener`.
    pub(crate) fn new(listener: &'static str) -> AcceptErrors {
        AcceptErrors { listener, pause: FIRST_PAUSE, log: Rarely::default() }
    }

    /// How long to pause after `error`: nothing for a connection reset before it was
    /// accepted; else (out of file descriptors, of memory) a pause that doubles, from
    /// 10 ms to 1 s, while accepts keep failing, so the loop does not spin and the
    /// connections in the backlog are accepted soon after descriptors are free again.
    pub(crate) fn failed(&mut self, error: &io::Error) -> Duration {
        use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
        if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
            return Duration::ZERO;
        }
        if let Some(failures) = self.log.occurred(Instant::now()) {
            tracing::error!(
                %error,
                listener = self.listener,
                failures,
                "cannot accept connections; retrying after a pause of up to 1 s, and serving the open ones"
            );
        }
        let pause = self.pause;
        self.pause = (pause * 2).min(LONGEST_PAUSE);
        pause
    }

    /// After a connection was accepted: the next failure pauses briefly again.
    pub(crate) fn succeeded(&mut self) {
        self.pause = FIRST_PAUSE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_up_to_a_second_and_starts_over_after_an_accept() {
        let mut errors = AcceptErrors::new("test");
        let no_files = io::Error::from_raw_os_error(24); // EMFILE
        let pauses: Vec<u128> = (0..9).map(|_| errors.failed(&no_files).as_millis()).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        errors.succeeded();
        assert_eq!(errors.failed(&no_files), FIRST_PAUSE);
        assert_eq!(errors.failed(&io::Error::from(io::ErrorKind::ConnectionReset)), Duration::ZERO);
    }
}
