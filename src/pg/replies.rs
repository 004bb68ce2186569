//! How replies leave for the client.
//!
//! Replies to the extended query protocol leave when the client asks for
//! them, at Sync or Flush, as PostgreSQL sends them: one write per round
//! trip instead of one per message (ParseComplete, BindComplete,
//! CommandComplete, ReadyForQuery). pgwire's handlers flush after several of
//! these messages; they run on a [`Replies`] client whose flush only hands
//! the messages to the connection's buffer. The buffer still goes out
//! whenever it fills, so large results stream.
//!
//! A statement's notices go out ahead of the message that ends it
//! (CommandComplete, ErrorResponse, EmptyQueryResponse), so a warning
//! found while its rows were sent still reaches the client with them; so
//! do the new values of the parameters a client is told of (ParameterStatus
//! for `SET TimeZone`, say).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Sink;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, SessionExtensions};
use pgwire::error::ErrorInfo;
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::startup::{ParameterStatus, SecretKey};
use pgwire::messages::{PgWireBackendMessage, ProtocolVersion};
use rustls_pki_types::CertificateDer;

use crate::sql::session::Notices;
use crate::sql::Settings;

/// A client connection that sends the session's notices and changed
/// parameters ahead of each statement's last reply, and whose flushes
/// (when `deferred`) wait for the client's Sync or Flush.
pub struct Replies<'a, C> {
    inner: &'a mut C,
    notices: Notices,
    settings: Settings,
    deferred: bool,
    /// Messages queued behind notices, sent as the connection takes them.
    queued: VecDeque<PgWireBackendMessage>,
}

impl<'a, C> Replies<'a, C> {
    /// Replies flushed when pgwire flushes (the simple query protocol).
    pub fn immediate(inner: &'a mut C, notices: &Notices, settings: &Settings) -> Self {
        Replies {
            inner,
            notices: notices.clone(),
            settings: settings.clone(),
            deferred: false,
            queued: VecDeque::new(),
        }
    }

    /// Replies flushed at the client's Sync or Flush (the extended protocol).
    pub fn deferred(inner: &'a mut C, notices: &Notices, settings: &Settings) -> Self {
        Replies {
            deferred: true,
            ..Replies::immediate(inner, notices, settings)
        }
    }
}

fn ends_statement(message: &PgWireBackendMessage) -> bool {
    matches!(
        message,
        PgWireBackendMessage::CommandComplete(_)
            | PgWireBackendMessage::ErrorResponse(_)
            | PgWireBackendMessage::EmptyQueryResponse(_)
    )
}

impl<C> Replies<'_, C>
where
    C: Sink<PgWireBackendMessage> + Unpin,
{
    fn send_queued(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        while !self.queued.is_empty() {
            match Pin::new(&mut *self.inner).poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            if let Some(message) = self.queued.pop_front() {
                Pin::new(&mut *self.inner).start_send(message)?;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<C> Sink<PgWireBackendMessage> for Replies<'_, C>
where
    C: Sink<PgWireBackendMessage> + Unpin,
{
    type Error = C::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        match self.send_queued(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut *self.inner).poll_ready(cx),
            other => other,
        }
    }

    fn start_send(mut self: Pin<&mut Self>, item: PgWireBackendMessage) -> Result<(), C::Error> {
        if ends_statement(&item) {
            let notices = self.notices.take();
            let changes = self.settings.changes_to_tell();
            if !notices.is_empty() || !changes.is_empty() {
                for message in notices {
                    let notice = ErrorInfo::new("NOTICE".into(), "00000".into(), message);
                    self.queued
                        .push_back(PgWireBackendMessage::NoticeResponse(notice.into()));
                }
                for (name, value) in changes {
                    let status = ParameterStatus::new(name.to_owned(), value);
                    self.queued
                        .push_back(PgWireBackendMessage::ParameterStatus(status));
                }
                self.queued.push_back(item);
                return Ok(());
            }
        }
        if self.queued.is_empty() {
            Pin::new(&mut *self.inner).start_send(item)
        } else {
            self.queued.push_back(item);
            Ok(())
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        match self.send_queued(cx) {
            Poll::Ready(Ok(())) if self.deferred => Poll::Ready(Ok(())),
            Poll::Ready(Ok(())) => Pin::new(&mut *self.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        match self.send_queued(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut *self.inner).poll_close(cx),
            other => other,
        }
    }
}

impl<C: ClientPortalStore> ClientPortalStore for Replies<'_, C> {
    type PortalStore = C::PortalStore;

    fn portal_store(&self) -> &Self::PortalStore {
        self.inner.portal_store()
    }
}

impl<C: ClientInfo> ClientInfo for Replies<'_, C> {
    fn socket_addr(&self) -> SocketAddr {
        self.inner.socket_addr()
    }

    fn is_secure(&self) -> bool {
        self.inner.is_secure()
    }

    fn protocol_version(&self) -> ProtocolVersion {
        self.inner.protocol_version()
    }

    fn set_protocol_version(&mut self, version: ProtocolVersion) {
        self.inner.set_protocol_version(version)
    }

    fn pid_and_secret_key(&self) -> (i32, SecretKey) {
        self.inner.pid_and_secret_key()
    }

    fn set_pid_and_secret_key(&mut self, pid: i32, secret_key: SecretKey) {
        self.inner.set_pid_and_secret_key(pid, secret_key)
    }

    fn state(&self) -> PgWireConnectionState {
        self.inner.state()
    }

    fn set_state(&mut self, new_state: PgWireConnectionState) {
        self.inner.set_state(new_state)
    }

    fn transaction_status(&self) -> TransactionStatus {
        self.inner.transaction_status()
    }

    fn set_transaction_status(&mut self, new_status: TransactionStatus) {
        self.inner.set_transaction_status(new_status)
    }

    fn metadata(&self) -> &HashMap<String, String> {
        self.inner.metadata()
    }

    fn metadata_mut(&mut self) -> &mut HashMap<String, String> {
        self.inner.metadata_mut()
    }

    fn session_extensions(&self) -> &SessionExtensions {
        self.inner.session_extensions()
    }

    fn sni_server_name(&self) -> Option<&str> {
        self.inner.sni_server_name()
    }

    fn client_certificates<'a>(&self) -> Option<&[CertificateDer<'a>]> {
        self.inner.client_certificates()
    }
}
