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
