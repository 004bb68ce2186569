//! One client connection: TLS negotiation (over TCP), then its messages,
//! each handled by pgwire's dispatcher and tablegate's handlers.
//!
//! This is pgwire's own connection loop with three changes: the bytes pass
//! through the frame checks of `frames` before pgwire decodes them; a bad
//! frame or an undecodable message is answered with FATAL 08P01 naming
//! what was wrong (pgwire closes silently); and a session left idle in a
//! transaction block past its limit is closed at once with FATAL 25P03,
//! not at its next message.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::{SinkExt, StreamExt};
use pgwire::api::{ClientInfo, DefaultClient, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{
    negotiate_tls, process_error, process_message, MaybeTls, PgWireMessageServerCodec,
};
use pgwire::tokio::TlsAcceptor;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::codec::{Framed, FramedParts};

use super::error::protocol_error;
use super::frames::{frame_error, Checked, FrameCheck, GSS_ENC_REQUEST, SSL_REQUEST};
use super::handler::{idle_watch, Handlers};
use super::idle::IdleWatch;
use super::key_portal::KeyPortal;
use crate::sql::Prepared;

/// How long a client may take from connecting to being logged in
/// (PostgreSQL's `authentication_timeout` is one minute too).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A client's socket.
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// A socket on its way to the thread that serves it: a socket belongs to
/// the reactor of the runtime it was made on, so it travels as std's.
pub enum Detached {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Socket {
    pub fn detach(self) -> std::io::Result<Detached> {
        Ok(match self {
            Socket::Tcp(s) => Detached::Tcp(s.into_std()?),
            Socket::Unix(s) => Detached::Unix(s.into_std()?),
        })
    }
}

impl Detached {
    /// The socket on the current runtime.
    pub fn attach(self) -> std::io::Result<Socket> {
        Ok(match self {
            Detached::Tcp(s) => Socket::Tcp(TcpStream::from_std(s)?),
            Detached::Unix(s) => Socket::Unix(UnixStream::from_std(s)?),
        })
    }
}

/// Serves one connection until the client leaves or is refused.
pub async fn serve(
    socket: Socket,
    tls: Option<TlsAcceptor>,
    handlers: Arc<Handlers>,
) -> std::io::Result<()> {
    let startup_deadline = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(startup_deadline);
    let negotiated = match socket {
        Socket::Tcp(socket) => tokio::select! {
            _ = &mut startup_deadline => return Ok(()),
            negotiated = negotiate_tls::<Arc<Prepared>>(socket, tls) => negotiated?,
        },
        Socket::Unix(mut socket) => {
            let head = tokio::select! {
                _ = &mut startup_deadline => return Ok(()),
                head = decline_encryption(&mut socket) => head?,
            };
            // pgwire wants an address for every client: a local one gets
            // 127.0.0.1 port 0, as in pgwire's own loop for Unix sockets.
            let client = DefaultClient::new(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), false);
            let mut parts = FramedParts::new(
                MaybeTls::Unix(socket),
                PgWireMessageServerCodec::new(client),
            );
            parts.read_buf = BytesMut::from(&head[..]);
            let mut framed = Framed::from_parts(parts);
            framed.set_state(PgWireConnectionState::AwaitingStartup);
            Some(framed)
        }
    };
    // A direct TLS handshake without a certificate to answer it.
    let Some(negotiated) = negotiated else {
        return Ok(());
    };
    let negotiated = negotiated.into_parts();
    let checked = Checked::new(
        negotiated.io,
        FrameCheck::new(handlers.scram()),
        negotiated.read_buf,
    );
    let mut parts = FramedParts::new(checked, negotiated.codec);
    parts.write_buf = negotiated.write_buf;
    let mut socket = Framed::from_parts(parts);

    let startup = handlers.startup();
    let cancel = handlers.canceller();
    let mut idle: Option<Arc<IdleWatch>> = None;
    let mut key_portal = KeyPortal::default();

    loop {
        let logging_in = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let expired = async {
            match &idle {
                Some(idle) => idle.expired().await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            _ = &mut startup_deadline, if logging_in => return Ok(()),
            _ = expired => {
                return fatal(&mut socket, "25P03", IdleWatch::MESSAGE.to_owned()).await;
            }
            next = socket.next() => next,
        };
        super::shards::note_served();
        let message = match next {
            Some(Ok(PgWireFrontendMessage::Terminate(_))) | None => return Ok(()),
            Some(Ok(message)) => message,
            Some(Err(PgWireError::IoError(e))) => {
                return match frame_error(&e) {
                    Some(bad) => fatal(&mut socket, "08P01", bad.to_string()).await,
                    None => Err(e),
                };
            }
            Some(Err(undecodable)) => {
                return fatal(&mut socket, "08P01", undecodable.to_string()).await;
            }
        };
        let wait_for_sync = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        let ends_transaction = matches!(
            message,
            PgWireFrontendMessage::Sync(_) | PgWireFrontendMessage::Query(_)
        );
        let handled = match key_portal.handle(&handlers, &mut socket, message).await {
            Ok(Some(message)) => {
                process_message(
                    message,
                    &mut socket,
                    startup.clone(),
                    handlers.clone(),
                    handlers.clone(),
                    handlers.clone(),
                    cancel.clone(),
                )
                .await
            }
            Ok(None) => Ok(()),
            Err(error) => Err(error),
        };
        if let Err(error) = handled {
            let error = protocol_error(error);
            let is_fatal = error.is_fatal();
            process_error(
                &mut socket,
                PgWireError::UserError(Box::new(error)),
                wait_for_sync,
            )
            .await?;
            if is_fatal {
                return Ok(());
            }
        }
        if ends_transaction {
            key_portal.transaction_ended(&socket);
        }
        if idle.is_none() {
            idle = idle_watch(&socket);
        }
    }
}

/// Answers "no" to requests for TLS or GSS encryption, as PostgreSQL does
/// where it offers none (on a local socket, where libpq sends none, or to
/// a client it refuses); returns the first 8 bytes of the packet that
/// follows them: its length and its code.
pub(super) async fn decline_encryption(
    socket: &mut (impl AsyncRead + AsyncWrite + Unpin),
) -> std::io::Result<[u8; 8]> {
    loop {
        let mut head = [0u8; 8];
        socket.read_exact(&mut head).await?;
        let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let code = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if length == 8 && (code == SSL_REQUEST || code == GSS_ENC_REQUEST) {
            socket.write_all(b"N").await?;
            continue;
        }
        return Ok(head);
    }
}

/// Sends a FATAL error and closes the connection.
async fn fatal<S>(socket: &mut S, code: &str, message: String) -> std::io::Result<()>
where
    S: futures::Sink<PgWireBackendMessage, Error = std::io::Error> + Unpin,
{
    let error = ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message);
    tracing::debug!("closing a connection: {}", error.message);
    socket
        .send(PgWireBackendMessage::ErrorResponse(error.into()))
        .await?;
    socket.close().await
}
