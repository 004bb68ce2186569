//! Connections on threads of their own: two threads per core, each with a
//! single-threaded runtime, and each connection served wholly by one of
//! them, taken in turn.
//!
//! A key read or a single-row write is a few microseconds of work between
//! two socket events. On the shared work-stealing runtime, each event could
//! wake a parked worker of another core and move the connection's task
//! there. On a 2-core machine, point selects from pgbench (8 connections)
//! cost the server 26.7 µs of CPU each that way, against 20.7 µs with one
//! worker. Here a connection stays on its thread, which waits in `epoll`
//! itself. Query plans still run on every core: the session hands them to
//! the engine's runtime (`Engine::execute`).
//!
//! Two threads a core, not one: with one, a thread that waits (on the
//! store, or for a core the clients hold) holds up every connection it
//! serves. In the bench on 2 cores (prepared point selects, 8 connections,
//! its client on the same cores, median of 3 runs), one thread a core did
//! 56,200 and 57,500 queries a second in two runs, the first with a p99
//! latency of 4.1 ms; two a core did 70,400 and 71,600 (p99 343 and
//! 345 µs), four a core 61,600 and 70,400. With 32 connections, sixteen a
//! core did 58,300 against 83,100 and 83,400 with two a core.
//!
//! Each thread asks the kernel for a short time slice (EEVDF's custom slice,
//! Linux 6.12 and later), which gives it earlier deadlines when it wakes: a
//! thread that answers a query in a few microseconds has no use for the
//! default 1.4 ms. With pgbench's point selects
//! (8 connections, client on the same 2 cores, five alternated runs) the
//! default slice of 1.4 ms gave 41,932-56,653 queries a second (median
//! 46,258), a slice of 0.1 ms 48,634-58,758 (median 52,624), PostgreSQL
//! 46,697-54,647 (median 53,432) between them.
//!
//! After each message its connections read, a thread goes on polling its
//! sockets for 150 µs before it sleeps: `epoll` without waiting, the core
//! given first to any other thread ready to run (`sched_yield`). A client
//! that sends its next query within that window finds the thread awake.
//! Waking a sleeping thread is slow on this machine's virtual cores: an
//! echo over loopback TCP (Python, 50 bytes back and forth) took
//! 73 µs a round trip with the echoing process asleep in `recv` between
//! messages and 24 µs with it polling. In the bench (prepared point
//! selects, median of 3 runs of 3 s, one build), windows of 0, 50 and
//! 150 µs gave 1.14x, 1.94x and 2.00x PostgreSQL's queries a second with
//! one connection over TCP, 1.01x, 1.14x and 1.20x with eight, and 1.28x,
//! 2.00x and 2.19x with one over a Unix socket. A quiet connection costs
//! nothing: with no message for 150 µs the thread sleeps in `epoll`.

use std::cell::Cell;
use std::future::Future;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The connection threads; they stop, dropping their connections, when
/// this is dropped.
pub struct Shards {
    runtimes: Vec<Handle>,
    /// Dropping a sender ends its thread's runtime.
    _stops: Vec<oneshot::Sender<()>>,
    next: usize,
}

impl Shards {
    /// Two threads per core.
    pub fn start() -> std::io::Result<Shards> {
        let threads = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut runtimes = Vec::with_capacity(threads);
        let mut stops = Vec::with_capacity(threads);
        for i in 0..threads {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            runtimes.push(runtime.handle().clone());
            runtime.spawn(poll_while_busy());
            stops.push(stop);
            std::thread::Builder::new()
                .name(format!("connections-{i}"))
                .spawn(move || {
                    if let Err(e) = request_slice(SLICE_NANOS) {
                        tracing::debug!("the connection thread keeps the default time slice: {e}");
                    }
                    let _ = runtime.block_on(stopped);
                })?;
        }
        Ok(Shards {
            runtimes,
            _stops: stops,
            next: 0,
        })
    }

    /// Runs a connection's task on the next thread in turn.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.next = (self.next + 1) % self.runtimes.len();
        self.runtimes[self.next].spawn(task);
    }
}

thread_local! {
    /// Messages this thread's connections have read.
    static SERVED: Cell<u64> = const { Cell::new(0) };
    /// The poller, asleep until the thread serves its next message.
    static POLLER: Cell<Option<Waker>> = const { Cell::new(None) };
}

/// Called by a connection for each message it reads.
pub fn note_served() {
    SERVED.set(SERVED.get().wrapping_add(1));
    if let Some(poller) = POLLER.take() {
        poller.wake();
    }
}

/// How long a connection thread goes on polling its sockets after the
/// last message it read.
const POLL_WINDOW: Duration = Duration::from_micros(150);

/// Keeps the thread polling its sockets until `POLL_WINDOW` after the
/// last message its connections read, then lets it sleep until the next.
async fn poll_while_busy() {
    let mut seen = SERVED.get();
    loop {
        std::future::poll_fn(|cx| {
            if SERVED.get() != seen {
                Poll::Ready(())
            } else {
                POLLER.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await;
        let mut polling = Polling::new(SERVED.get(), Instant::now());
        loop {
            // The runtime, with no other task ready, asks `epoll` for
            // events without waiting before it comes back here.
            tokio::task::yield_now().await;
            if !polling.goes_on(SERVED.get(), Instant::now()) {
                break;
            }
            // Any other thread ready to run on this core goes first.
            // SAFETY: a plain system call.
            unsafe { libc::sched_yield() };
        }
        seen = polling.seen;
    }
}

/// When a thread's polling stops: `POLL_WINDOW` after the last message.
struct Polling {
    seen: u64,
    since: Instant,
}

impl Polling {
    fn new(served: u64, now: Instant) -> Polling {
        Polling {
            seen: served,
            since: now,
        }
    }

    /// Whether to poll again, `served` messages read by `now`.
    fn goes_on(&mut self, served: u64, now: Instant) -> bool {
        if served != self.seen {
            self.seen = served;
            self.since = now;
        }
        now.duration_since(self.since) < POLL_WINDOW
    }
}

/// The time slice a connection thread asks for: the shortest the kernel
/// grants.
const SLICE_NANOS: u64 = 100_000;

/// The size the kernel is told `struct sched_attr` has.
const SCHED_ATTR_BYTES: u32 = std::mem::size_of::<SchedAttr>() as u32;

/// `struct sched_attr` of sched_setattr(2), its first version.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    /// For the normal policy, the slice asked for (Linux 6.12 and later).
    runtime: u64,
    deadline: u64,
    period: u64,
}

fn sched_attr() -> std::io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a `struct sched_attr` of `SCHED_ATTR_BYTES` bytes
    // the kernel fills (its `size` too); 0 is the calling thread.
    let done = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr, SCHED_ATTR_BYTES, 0) };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(attr)
}

/// Asks for a time slice of `nanos` for the calling thread, keeping its
/// policy and nice value.
fn request_slice(nanos: u64) -> std::io::Result<()> {
    let mut attr = sched_attr()?;
    attr.runtime = nanos;
    // SAFETY: `attr` is a whole `struct sched_attr`; 0 is the calling
    // thread.
    let done = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr, 0) };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_goes_on_until_a_window_after_the_last_message() {
        let start = Instant::now();
        let after = |micros| start + Duration::from_micros(micros);
        let mut polling = Polling::new(7, start);
        assert!(polling.goes_on(7, after(100)));
        // A message at 140 µs: the window starts again.
        assert!(polling.goes_on(8, after(140)));
        assert!(polling.goes_on(8, after(200)));
        assert!(polling.goes_on(8, after(289)));
        assert!(!polling.goes_on(8, after(290)));
    }

    #[test]
    fn a_connection_thread_sleeps_once_its_connections_are_quiet() {
        let mut shards = Shards::start().unwrap();
        let (sent, received) = std::sync::mpsc::channel();
        shards.spawn(async move {
            note_served();
            // SAFETY: a plain system call.
            let tid = unsafe { libc::gettid() };
            sent.send(tid).unwrap();
        });
        let tid = received.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let before = crate::thread_run_time(tid);
        std::thread::sleep(Duration::from_millis(200));
        let ran = crate::thread_run_time(tid) - before;
        assert!(
            ran < Duration::from_millis(5),
            "a quiet connection thread ran {ran:?} in 200 ms"
        );
    }

    #[test]
    fn a_connection_thread_gets_the_slice_it_asks_for_and_keeps_its_nice_value() {
        std::thread::spawn(|| {
            // On Linux, the calling thread's nice value.
            // SAFETY: a plain system call on the calling thread.
            assert_eq!(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 5) }, 0);
            let before = sched_attr().unwrap();
            assert_eq!((before.size, before.nice), (SCHED_ATTR_BYTES, 5));
            if before.runtime == 0 {
                // A kernel without custom slices (before 6.12) reports none.
                return;
            }
            assert_ne!(before.runtime, SLICE_NANOS);
            request_slice(SLICE_NANOS).unwrap();
            let after = sched_attr().unwrap();
            assert_eq!(after.runtime, SLICE_NANOS);
            assert_eq!((after.policy, after.nice), (before.policy, before.nice));
        })
        .join()
        .unwrap();
    }
}
