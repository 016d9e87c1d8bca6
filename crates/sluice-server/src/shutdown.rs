//! Graceful shutdown: SIGTERM or SIGINT stops accepting, lets requests in flight finish,
//! writes a last snapshot and exits.

use tokio::sync::watch;

/// Tells every server to stop; clones wait for the same signal.
#[derive(Clone, Debug)]
pub(crate) struct Shutdown {
    receiver: watch::Receiver<bool>,
}

impl Shutdown {
    /// A shutdown triggered by SIGTERM or SIGINT (Ctrl-C).
    pub(crate) fn on_signals() -> Shutdown {
        let (sender, receiver) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
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

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
