//! Connection workers: one thread per core, each running a single-threaded tokio runtime
//! that serves the connections handed to it.
//!
//! Why not one multi-threaded runtime for everything: there, a task that answers an HTTP/2
//! stream wakes its connection into the scheduler's LIFO slot, so the connection writes
//! each reply with its own `writev` as soon as it is ready. On a single-threaded runtime
//! the woken connection waits its turn behind the other streams' tasks, and then writes all
//! their replies at once. Measured with `scripts/loadtest.sh` (server pinned to one core):
//! 11.1 µs of server CPU per gRPC call before, 6.5 µs after; HTTP/1 went from 9.9 to
//! 9.3 µs per check (no work stealing, no cross-thread wake-ups).
//!
//! Connections reach the workers through [`crate::runtime::handoff::Handoff`].

use std::future::Future;
use std::pin::Pin;
use tokio::sync::oneshot;

/// What a worker runs: built on the worker's own thread, so it need not be `Send`.
pub(crate) type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = anyhow::Result<()>>>> + Send>;

/// The worker threads.
#[derive(Debug)]
pub(crate) struct Workers {
    done: Vec<oneshot::Receiver<anyhow::Result<()>>>,
}

impl Workers {
    /// Starts one thread per job, each running its job on a runtime of its own.
    pub(crate) fn start(jobs: Vec<Job>) -> anyhow::Result<Workers> {
        let mut done = Vec::with_capacity(jobs.len());
        for (index, job) in jobs.into_iter().enumerate() {
            let (sender, receiver) = oneshot::channel();
            std::thread::Builder::new().name(format!("sluice-worker-{index}")).spawn(move || {
                let _ = sender.send(run(job));
            })?;
            done.push(receiver);
        }
        Ok(Workers { done })
    }

    /// Waits until every worker has finished; the first failure, if any.
    pub(crate) async fn wait(self) -> anyhow::Result<()> {
        let mut outcome = Ok(());
        for (index, done) in self.done.into_iter().enumerate() {
            let result = done.await.unwrap_or_else(|_| Err(anyhow::anyhow!("worker {index} stopped unexpectedly")));
            if outcome.is_ok() {
                outcome = result;
            }
        }
        outcome
    }
}

fn run(job: Job) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(job())
}

/// The most workers a service may start. A worker beyond the cores serves nothing faster
/// (each connection stays on one worker) but costs a thread, a runtime, 2 to 5 MiB (mostly
/// mimalloc's heap on transparent huge pages; about 1 MiB with `MIMALLOC_ALLOW_THP=0`,
/// `scripts/worker_memory.sh`) and, on Redis, a connection: 5 000 workers took 16.7 GB. A
/// fixed bound, rather than one from the cores, lets one configuration file be valid on
/// every machine (`check-config` too).
pub(crate) const MAX_COUNT: usize = 256;

/// The number of workers to start when none is configured: the cores this process may use,
/// at most [`MAX_COUNT`].
pub(crate) fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(MAX_COUNT)
}
