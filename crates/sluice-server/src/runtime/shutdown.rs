//! Shutdown, bounded whatever clients do: the first SIGTERM or SIGINT stops accepting and
//! lets requests in flight finish; once the grace period is over, the connections left
//! are dropped; the service then writes its last snapshot and exits 0. A second signal
//! exits at once, with status 128 + its number (143 for SIGTERM, 130 for SIGINT).

use std::time::Duration;
use tokio::sync::watch;

/// Where the service is in its shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Running,
    /// Not accepting any more; connections are finishing.
    Draining,
    /// The grace period is over: the connections left are dropped.
    Forced,
}

/// Tells every server to stop; clones wait for the same signal.
#[derive(Clone, Debug)]
pub(crate) struct Shutdown {
    receiver: watch::Receiver<Stage>,
}

impl Shutdown {
    /// A shutdown that begins when `signal` completes, forced `grace` after it began.
    pub(crate) fn when(signal: impl Future<Output = ()> + Send + 'static, grace: Duration) -> Shutdown {
        let (sender, receiver) = watch::channel(Stage::Running);
        tokio::spawn(async move {
            signal.await;
            run_stages(&sender, grace).await;
        });
        Shutdown { receiver }
    }

    /// Completes once shutdown has begun.
    pub(crate) async fn wait(self) {
        self.reach(Stage::Draining).await;
    }

    /// Completes once the grace period is over: whatever is still open is to be dropped.
    pub(crate) async fn forced(self) {
        self.reach(Stage::Forced).await;
    }

    async fn reach(mut self, stage: Stage) {
        // An error means the sender is gone: the process is ending anyway.
        let _ = self.receiver.wait_for(|now| *now >= stage).await;
    }
}

/// Completes at the first SIGTERM or SIGINT (Ctrl-C); from then on, a second one exits the
/// process at once. The handlers are installed before this returns, so a signal arriving
/// any time after it is never the default "die now". `grace` is only logged.
pub(crate) fn signals(grace: Duration) -> impl Future<Output = ()> + Send + 'static {
    let mut signals = Signals::install();
    async move {
        signals.next().await;
        tracing::info!(?grace, "shutting down: draining requests in flight (a second signal exits at once)");
        tokio::spawn(async move { exit_now(signals.next().await) });
    }
}

/// Drains, then forces after `grace`.
async fn run_stages(sender: &watch::Sender<Stage>, grace: Duration) {
    let _ = sender.send(Stage::Draining);
    tokio::time::sleep(grace).await;
    tracing::warn!(?grace, "the shutdown grace period is over: dropping the connections still open");
    let _ = sender.send(Stage::Forced);
}

/// Exits at once on a second signal: the operator asked twice, nothing slow is tried.
fn exit_now(signal: i32) -> ! {
    eprintln!("sluice: second signal: exiting now");
    std::process::exit(128 + signal)
}

/// The installed SIGTERM and SIGINT handlers.
struct Signals {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

/// SIGINT's and SIGTERM's numbers, for the exit status.
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

impl Signals {
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals { terminate: signal(SignalKind::terminate()).ok(), interrupt: signal(SignalKind::interrupt()).ok() }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The number of the next signal.
    async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        {
            let (Some(terminate), Some(interrupt)) = (&mut self.terminate, &mut self.interrupt) else {
                let _ = tokio::signal::ctrl_c().await;
                return SIGINT;
            };
            tokio::select! {
                _ = terminate.recv() => SIGTERM,
                _ = interrupt.recv() => SIGINT,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            SIGINT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    // Time is paused (it moves on only when every task waits): "at once" is exact, not a
    // race between the grace and the machine's load.
    #[tokio::test(start_paused = true)]
    async fn draining_comes_first_and_forcing_a_grace_later() {
        let grace = Duration::from_millis(200);
        let (trigger, triggered) = tokio::sync::oneshot::channel::<()>();
        let shutdown = Shutdown::when(
            async {
                let _ = triggered.await;
            },
            grace,
        );
        assert_eq!(*shutdown.receiver.borrow(), Stage::Running);
        let started = Instant::now();
        trigger.send(()).expect("the shutdown waits for its signal");
        shutdown.clone().wait().await;
        assert!(started.elapsed() < grace, "draining begins at once");
        shutdown.forced().await;
        assert!(started.elapsed() >= grace, "forced only after the grace");
    }
}
