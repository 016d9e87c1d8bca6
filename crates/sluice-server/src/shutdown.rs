//! Graceful shutdown: SIGTERM or SIGINT stops accepting, lets requests in flight finish,
//! writes a last snapshot and exits.

use tokio::sync::watch;

/// Tells every server to stop; clones wait for the same signal.
#[derive(Clone, Debug)]
pub(crate) struct Shutdown {
    receiver: watch::Receiver<bool>,
}

impl Shutdown {
    /// A shutdown triggered by SIGTERM or SIGINT (Ctrl-C). The handlers are installed before
    /// this returns, so a signal arriving any time after it is never the default "die now".
    pub(crate) fn on_signals() -> Shutdown {
        let (sender, receiver) = watch::channel(false);
        let signals = Signals::install();
        tokio::spawn(async move {
            signals.wait().await;
            tracing::info!("shutting down: draining requests in flight");
            let _ = sender.send(true);
        });
        Shutdown { receiver }
    }

    /// Completes once shutdown has begun.
    pub(crate) async fn wait(mut self) {
        let _ = self.receiver.wait_for(|stopping| *stopping).await;
    }
}

/// The installed SIGTERM and SIGINT handlers.
struct Signals {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

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

    async fn wait(self) {
        #[cfg(unix)]
        {
            let (Some(mut terminate), Some(mut interrupt)) = (self.terminate, self.interrupt) else {
                let _ = tokio::signal::ctrl_c().await;
                return;
            };
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
