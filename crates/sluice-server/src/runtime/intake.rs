//! A new gRPC connection's first moments, served on the intake runtime, then on its worker.
//!
//! A worker ([`crate::runtime::workers`]) runs its tasks in turn, with no priorities: a
//! connection that arrives while the worker reads a burst of reports from thousands of
//! others waits behind all of them, at each step of its first call (its handshake, its
//! stream's task, the answer's write). An Envoy opening its quota stream would wait for
//! its first assignment as long as the burst takes to read: 0.2 s behind 40 000 reports
//! on one core (docs/benchmarks.md, "RLQS at fleet scale").
//!
//! So a new connection's task, and its first stream's, start on the intake runtime, the
//! main one, which has little else to do; each moves to its worker at its first poll after
//! the connection's [`YOUTH`]. Until then, what the first stream asks of the RLQS hub (on
//! the first worker) and the hub's answer cross threads, and a task woken from another
//! thread is taken ahead of the worker's own (tokio polls them every few dozen tasks). A
//! connection's second stream settles it at once, and its later streams, and the tasks
//! they start, run on its worker from the start: what a flood of streams allocates is the
//! worker's, which gives it back as it serves again. hyper parses every frame it has read
//! before it starts a stream, so a young connection's socket reads one frame part at a
//! time, settles the connection at its second HEADERS frame
//! ([`crate::grpc::frame_cursor`]), and reads nothing more until the connection's task has
//! moved ([`Reading`]): a client that sends a hundred streams at once has only the first
//! parsed on the intake runtime. Memory allocated there and freed on the worker would stay
//! with the intake runtime's threads, which allocate too little to give it back. The socket
//! is registered with the worker's runtime from the start, so nothing is re-registered
//! when a task moves.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// How long a new connection's tasks run on the intake runtime: a new Envoy's stream
/// sends its first report at once, and is answered within milliseconds there.
pub(crate) const YOUTH: Duration = Duration::from_secs(1);

/// Where one connection's tasks run: the connection's and its first stream's on the
/// intake runtime until the connection is [`YOUTH`] old or opens a second stream, then on
/// its worker; the others on its worker. Also hyper's executor for the connection's streams.
#[derive(Clone, Debug)]
pub(crate) struct Home {
    intake: Handle,
    worker: Handle,
    settling: Arc<Settling>,
}

/// When a connection settles on its worker.
#[derive(Debug)]
struct Settling {
    at: Instant,
    /// Set once settled, so that a settled connection reads no clock.
    settled: AtomicBool,
    /// Set once the connection's first stream has started.
    first_stream: AtomicBool,
    /// Set once the connection's own task runs on its worker.
    moved: AtomicBool,
}

/// Where a connection's socket may be read now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Young, on the intake runtime: a frame part at a time, up to its second stream.
    Young,
    /// Settled, its task not yet moved: nothing, until the task runs on its worker.
    Moving,
    /// On its worker: freely.
    Settled,
}

/// Which of a connection's tasks a [`Moving`] task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Task {
    Connection,
    FirstStream,
}

impl Home {
    /// The home of a connection accepted now and served by the worker of `worker`, its
    /// first moments on `intake`.
    pub(crate) fn new(intake: Handle, worker: Handle) -> Home {
        Home::young_for(intake, worker, YOUTH)
    }

    /// The home of a connection accepted now, young for `youth` (tests: longer than any
    /// stall of a loaded machine).
    pub(crate) fn young_for(intake: Handle, worker: Handle, youth: Duration) -> Home {
        let (settled, first_stream, moved) = (AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false));
        let settling = Settling { at: Instant::now() + youth, settled, first_stream, moved };
        Home { intake, worker, settling: Arc::new(settling) }
    }

    /// Whether the connection's tasks belong on its worker now.
    fn is_settled(&self) -> bool {
        let settling = &self.settling;
        if settling.settled.load(Ordering::Relaxed) {
            return true;
        }
        let settled = Instant::now() >= settling.at;
        if settled {
            settling.settled.store(true, Ordering::Relaxed);
        }
        settled
    }

    /// Settles the connection now, before its youth is over: its tasks move to its worker
    /// at their next poll.
    pub(crate) fn settle(&self) {
        self.settling.settled.store(true, Ordering::Relaxed);
    }

    /// Where the connection's socket may be read now.
    pub(crate) fn reading(&self) -> Reading {
        if self.settling.moved.load(Ordering::Acquire) {
            Reading::Settled
        } else if self.is_settled() {
            Reading::Moving
        } else {
            Reading::Young
        }
    }

    /// Runs `future`, the connection's own task: on the intake runtime while the
    /// connection is young, moving to its worker at its first poll after; on the worker
    /// once it is settled.
    pub(crate) fn spawn_connection<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawn(Task::Connection, future);
    }

    /// Runs `future`, a `task` of the connection, as [`Home::spawn_connection`] does.
    fn spawn<F>(&self, task: Task, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.is_settled() {
            self.moved(task);
            self.spawn_on_worker(future);
        } else {
            drop(self.intake.spawn(Moving { future: Some(Box::pin(future)), home: self.clone(), task }));
        }
    }

    /// Notes that `task` runs on the worker from now on.
    fn moved(&self, task: Task) {
        if task == Task::Connection {
            self.settling.moved.store(true, Ordering::Release);
        }
    }

    /// Runs `future` on the connection's worker.
    pub(crate) fn spawn_on_worker<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.worker.spawn(future));
    }
}

/// hyper's executor: a stream's task is spawned where [`Home::spawn`] puts the
/// connection's first stream, on the worker for the others; a second stream settles the
/// connection.
impl<F> hyper::rt::Executor<F> for Home
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        if self.settling.first_stream.swap(true, Ordering::Relaxed) {
            // A second stream: the connection settles on its worker (its task moves at its
            // next poll), so that what its streams make it hold is the worker's.
            self.settling.settled.store(true, Ordering::Relaxed);
            self.spawn_on_worker(future);
        } else {
            self.spawn(Task::FirstStream, future);
        }
    }
}

/// A task on the intake runtime that moves to its worker once its connection settles.
struct Moving<F> {
    /// `None` once moved.
    future: Option<Pin<Box<F>>>,
    home: Home,
    task: Task,
}

impl<F> Future for Moving<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let moving = self.get_mut();
        let Some(future) = moving.future.as_mut() else { return Poll::Ready(()) };
        if !moving.home.is_settled() {
            return future.as_mut().poll(context);
        }
        if let Some(future) = moving.future.take() {
            moving.home.moved(moving.task);
            drop(moving.home.worker.spawn(future));
        }
        Poll::Ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::ThreadId;
    use tokio::sync::mpsc;

    /// A youth no stall of a loaded machine outlasts.
    const HOUR: Duration = Duration::from_secs(3600);

    /// A single-threaded runtime on a thread of its own, as a worker's; its handle and thread.
    fn worker() -> (Handle, ThreadId) {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            sender.send((runtime.handle().clone(), std::thread::current().id())).unwrap();
            runtime.block_on(std::future::pending::<()>());
        });
        receiver.recv().unwrap()
    }

    #[test]
    fn a_young_connections_task_is_polled_where_it_runs_then_moves_to_its_worker_once_settled() {
        let (worker, worker_thread) = worker();
        let intake = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let home = Home::young_for(intake.handle().clone(), worker, HOUR);
        let (polled, threads) = std::sync::mpsc::channel();
        let task = std::future::poll_fn(move |_| {
            polled.send(std::thread::current().id()).unwrap();
            Poll::<()>::Pending
        });
        let mut moving = Moving { future: Some(Box::pin(task)), home: home.clone(), task: Task::Connection };
        let mut context = Context::from_waker(futures_util::task::noop_waker_ref());
        assert!(Pin::new(&mut moving).poll(&mut context).is_pending());
        assert_eq!(threads.recv().unwrap(), std::thread::current().id(), "young: polled where it is");
        assert_eq!(home.reading(), Reading::Young);
        home.settle();
        assert_eq!(home.reading(), Reading::Moving, "settled: its socket waits for the task to move");
        assert!(Pin::new(&mut moving).poll(&mut context).is_ready(), "settled: it leaves");
        assert_eq!(home.reading(), Reading::Settled, "and is read freely on its worker");
        assert_eq!(threads.recv().unwrap(), worker_thread, "and goes on on its worker");
        assert!(threads.try_recv().is_err(), "polled once there, not here");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_young_connections_first_stream_starts_on_the_intake_runtime_and_its_later_ones_on_its_worker() {
        let (worker, worker_thread) = worker();
        let home = Home::young_for(Handle::current(), worker, HOUR);
        let (polled, mut threads) = mpsc::unbounded_channel();
        let start = |stream: usize| {
            let polled = polled.clone();
            hyper::rt::Executor::execute(
                &home,
                async move { polled.send((stream, std::thread::current().id())).unwrap() },
            );
        };
        start(0);
        let (_, first) = threads.recv().await.unwrap();
        assert_ne!(first, worker_thread, "the first stream: on the intake runtime");
        start(1);
        start(2);
        let mut later = [threads.recv().await.unwrap(), threads.recv().await.unwrap()];
        later.sort_by_key(|(stream, _)| *stream);
        assert_eq!(later, [(1, worker_thread), (2, worker_thread)], "the later ones: on the worker");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_settled_connections_task_starts_on_its_worker() {
        let (worker, worker_thread) = worker();
        let home = Home::new(Handle::current(), worker);
        home.settle();
        let (polled, mut threads) = mpsc::unbounded_channel();
        home.spawn_connection(async move { polled.send(std::thread::current().id()).unwrap() });
        assert_eq!(threads.recv().await.unwrap(), worker_thread);
        assert_eq!(home.reading(), Reading::Settled);
    }
}
