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

use std::future::Future;

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
