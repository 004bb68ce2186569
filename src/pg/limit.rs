//! The connection limit. A connection past it gets what PostgreSQL sends
//! (FATAL, SQLSTATE 53300, "sorry, too many clients already") once it has
//! sent its startup packet, and is closed; the connections already open
//! carry on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::connection::{decline_encryption, Socket};

/// PostgreSQL's default `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 100;
/// How long a refused client may take to send its startup packet.
const STARTUP_WAIT: Duration = Duration::from_secs(5);
/// Startup packets longer than this are not read (PostgreSQL's limit).
const MAX_STARTUP_PACKET: usize = 10_000;

/// Open connections, against the limit.
pub struct Connections {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One open connection's place; given back when dropped.
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connections {
    pub fn new(max: usize) -> Self {
        Connections {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A place for a new connection, or `None` when all are taken.
    pub fn take(&self) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.open.clone()))
    }
}

/// Tells a client there is no room: declines SSL and GSS encryption, reads
/// its startup packet, sends the FATAL error and closes.
pub async fn refuse(socket: Socket) {
    match socket {
        Socket::Tcp(socket) => refuse_on(socket).await,
        Socket::Unix(socket) => refuse_on(socket).await,
    }
}

async fn refuse_on(mut socket: impl AsyncRead + AsyncWrite + Unpin) {
    let refused = async {
        let head = decline_encryption(&mut socket).await?;
        let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if !(8..=MAX_STARTUP_PACKET).contains(&length) {
            return Ok(());
        }
        let mut rest = vec![0; length - 8];
        socket.read_exact(&mut rest).await?;
        socket.write_all(&too_many_clients()).await?;
        socket.shutdown().await
    };
    let _: Result<std::io::Result<()>, _> = tokio::time::timeout(STARTUP_WAIT, refused).await;
}

/// The ErrorResponse message.
fn too_many_clients() -> Vec<u8> {
    let mut fields = Vec::new();
    for (code, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "53300"),
        (b'M', "sorry, too many clients already"),
    ] {
        fields.push(code);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_given_back() {
        let connections = Connections::new(2);
        let a = connections.take().expect("first");
        let _b = connections.take().expect("second");
        assert!(connections.take().is_none());
        drop(a);
        assert!(connections.take().is_some());
    }
}
