//! Cancel requests. pgwire answers a CancelRequest by abandoning a query
//! that is still being planned; most of a query's work, though, happens
//! while its rows stream out, after planning. Here every connection gets a
//! cancel signal, and its result streams stop at the next signal with
//! SQLSTATE 57014 (dropping a stream stops DataFusion's work on it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::ConnectionManager;
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::startup::SecretKey;
use tokio::sync::watch;

use crate::sql::SqlError;

/// The cancel signals of the open connections, by backend process id.
#[derive(Default)]
pub struct Cancels {
    connections: Mutex<HashMap<i32, (Bytes, watch::Sender<u64>)>>,
}

/// A connection's signal; unregistered when dropped (with the connection).
pub struct Registration {
    cancels: Arc<Cancels>,
    pid: i32,
    pub signal: watch::Receiver<u64>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cancels
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.pid);
    }
}

impl Cancels {
    pub fn register(self: &Arc<Self>, pid: i32, secret: &SecretKey) -> Registration {
        let (sender, signal) = watch::channel(0);
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pid, (secret.to_bytes(), sender));
        Registration {
            cancels: self.clone(),
            pid,
            signal,
        }
    }

    /// Signals the connection, if the secret is its own.
    fn cancel(&self, pid: i32, secret: &SecretKey) {
        let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((own, sender)) = connections.get(&pid) {
            if *own == secret.to_bytes() {
                sender.send_modify(|n| *n += 1);
            }
        }
    }
}

/// pgwire's handler (for queries being planned) and the signals.
pub struct Canceller {
    pub planning: DefaultCancelHandler,
    pub cancels: Arc<Cancels>,
}

impl Canceller {
    pub fn new(connections: Arc<ConnectionManager>, cancels: Arc<Cancels>) -> Self {
        Canceller {
            planning: DefaultCancelHandler::new(connections),
            cancels,
        }
    }
}

#[async_trait]
impl CancelHandler for Canceller {
    async fn on_cancel_request(&self, request: CancelRequest) {
        self.cancels.cancel(request.pid, &request.secret_key);
        self.planning.on_cancel_request(request).await;
    }
}

/// A result stream that ends with 57014 when the connection is signalled
/// after it started.
pub fn cancellable(
    batches: SendableRecordBatchStream,
    mut signal: watch::Receiver<u64>,
) -> impl Stream<Item = datafusion::error::Result<RecordBatch>> + Send + 'static {
    signal.borrow_and_update();
    futures::stream::unfold(Some((batches, signal)), |state| async move {
        let (mut batches, mut signal) = state?;
        tokio::select! {
            batch = batches.next() => batch.map(|b| (b, Some((batches, signal)))),
            // A closed signal means the connection is gone: nobody reads.
            changed = signal.changed() => changed.ok().map(|()| {
                (Err(DataFusionError::External(Box::new(canceled()))), None)
            }),
        }
    })
}

/// The error of a statement a cancel request stopped, as PostgreSQL's.
pub fn canceled() -> SqlError {
    SqlError::value("57014", "canceling statement due to user request")
}
