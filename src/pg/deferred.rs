//! Replies to the extended query protocol leave when the client asks for
//! them, at Sync or Flush, as PostgreSQL sends them: one write per round
//! trip instead of one per message (ParseComplete, BindComplete,
//! CommandComplete, ReadyForQuery). pgwire's handlers flush after several of
//! these messages; they run here on a [`Deferred`] client, whose flush only
//! hands the messages to the connection's buffer. The buffer still goes out
//! whenever it fills, so large results stream.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Sink;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, SessionExtensions};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::startup::SecretKey;
use pgwire::messages::{PgWireBackendMessage, ProtocolVersion};
use rustls_pki_types::CertificateDer;

/// A client connection whose flushes wait for the client's Sync or Flush.
pub struct Deferred<'a, C> {
    inner: &'a mut C,
}

impl<'a, C> Deferred<'a, C> {
    pub fn new(inner: &'a mut C) -> Self {
        Deferred { inner }
    }
}

impl<C> Sink<PgWireBackendMessage> for Deferred<'_, C>
where
    C: Sink<PgWireBackendMessage> + Unpin,
{
    type Error = C::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        Pin::new(&mut *self.inner).poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, item: PgWireBackendMessage) -> Result<(), C::Error> {
        Pin::new(&mut *self.inner).start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        Pin::new(&mut *self.inner).poll_close(cx)
    }
}

impl<C: ClientPortalStore> ClientPortalStore for Deferred<'_, C> {
    type PortalStore = C::PortalStore;

    fn portal_store(&self) -> &Self::PortalStore {
        self.inner.portal_store()
    }
}

impl<C: ClientInfo> ClientInfo for Deferred<'_, C> {
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
