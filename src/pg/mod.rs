//! The wire layer: a PostgreSQL-protocol server over SQL sessions.
//!
//! - `connection`: one connection's loop: TLS, then each message to
//!   pgwire's dispatcher.
//! - `frames`: frame checks ahead of pgwire's decoder (FATAL 08P01 for a
//!   bad frame).
//! - `handler`: pgwire's simple and extended query handlers; a connection's
//!   session lives in its extensions.
//! - `encode`: Arrow results to row descriptions and data rows, and rows
//!   read by key to data rows from their stored values.
//! - `key_portal`: the portal of a prepared read by key, bound and run
//!   without pgwire's portal store.
//! - `params`: parameter types and values.
//! - `error`: every error's SQLSTATE, in one match.
//! - `auth`: trust or SCRAM-SHA-256, and TLS.
//! - `cancel`: cancel requests that stop queries while their rows stream.
//! - `limit`: the connection limit (SQLSTATE 53300 past it).
//! - `idle`: `idle_in_transaction_session_timeout` (FATAL 25P03).
//! - `replies`: replies held until the client's Sync or Flush, with the
//!   session's notices sent ahead of each statement's last reply.
//! - `shards`: the connection threads, two per core, each connection on one.
//! - `unix_socket`: the Unix-domain socket, named as PostgreSQL's.
//!
//! Layer rule: `pg` depends on `sql` (and the types `sql` returns); it knows
//! nothing of keys, entities or the store.

mod auth;
mod cancel;
mod connection;
mod encode;
mod error;
mod frames;
mod handler;
mod idle;
mod key_portal;
mod limit;
mod params;
mod replies;
mod shards;
mod unix_socket;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixStream};

use connection::Socket;
use unix_socket::UnixSocket;

pub use auth::{tls_acceptor, Authentication, Users};
pub use error::sqlstate;
pub use limit::DEFAULT_MAX_CONNECTIONS;
pub use pgwire::tokio::TlsAcceptor;

use crate::sql::Engine;

/// A listening server: on a TCP address, and on a Unix-domain socket if
/// given one.
pub struct Server {
    listener: TcpListener,
    unix: Option<UnixSocket>,
    handlers: Arc<handler::Handlers>,
    tls: Option<TlsAcceptor>,
    connections: limit::Connections,
    shards: shards::Shards,
}

impl Server {
    /// A server that trusts every connection, without TLS (for loopback
    /// addresses and tests).
    pub async fn bind(addr: &str, engine: Arc<Engine>) -> std::io::Result<Server> {
        Server::bind_with(addr, engine, Authentication::Trust, None).await
    }

    pub async fn bind_with(
        addr: &str,
        engine: Arc<Engine>,
        authentication: Authentication,
        tls: Option<TlsAcceptor>,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Server {
            listener,
            unix: None,
            handlers: handler::Handlers::new(engine, authentication),
            tls,
            connections: limit::Connections::new(DEFAULT_MAX_CONNECTIONS),
            shards: shards::Shards::start()?,
        })
    }

    /// At most `max` connections at once (cancel requests included, as in
    /// PostgreSQL, they come on connections of their own).
    pub fn with_max_connections(mut self, max: usize) -> Server {
        self.connections = limit::Connections::new(max);
        self
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Also listens on `<dir>/.s.PGSQL.<port>`, the port being the TCP
    /// one: where psql and libpq look for it with `-h <dir>`.
    pub fn with_unix_socket(mut self, dir: &Path) -> std::io::Result<Server> {
        let port = self.local_addr()?.port();
        self.unix = Some(UnixSocket::bind(dir, port)?);
        Ok(self)
    }

    /// The Unix-domain socket's path, if the server listens on one.
    pub fn unix_socket_path(&self) -> Option<&Path> {
        self.unix.as_ref().map(|unix| unix.path())
    }

    /// Serves connections until `shutdown` completes; then, or when this
    /// future is dropped, the open connections are closed (and the Unix
    /// socket's file removed). After `shutdown`, the engine stores what a
    /// clean stop keeps ([`Engine::close`]).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut shards = self.shards;
        loop {
            let (socket, peer) = tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((socket, peer)) => {
                        // Each reply goes out as soon as it is written, as
                        // PostgreSQL's backends send theirs.
                        if let Err(e) = socket.set_nodelay(true) {
                            tracing::warn!(%peer, "cannot set TCP_NODELAY: {e}");
                        }
                        (Socket::Tcp(socket), peer.to_string())
                    }
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        continue;
                    }
                },
                accepted = accept_local(self.unix.as_ref()) => match accepted {
                    Ok(socket) => (Socket::Unix(socket), "local".to_owned()),
                    Err(e) => {
                        tracing::warn!("accept failed on the Unix socket: {e}");
                        continue;
                    }
                },
            };
            let Some(slot) = self.connections.take() else {
                tracing::warn!(%peer, "connection refused: too many clients");
                tokio::spawn(limit::refuse(socket));
                continue;
            };
            let socket = match socket.detach() {
                Ok(socket) => socket,
                Err(e) => {
                    tracing::warn!(%peer, "cannot hand over the connection: {e}");
                    continue;
                }
            };
            let handlers = self.handlers.clone();
            let tls = self.tls.clone();
            shards.spawn(async move {
                let served = match socket.attach() {
                    Ok(socket) => connection::serve(socket, tls, handlers).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = served {
                    tracing::debug!(%peer, "connection ended with an error: {e}");
                }
                drop(slot);
            });
        }
        // The connections stop first (a statement still running when the
        // engine closes gets no sequence value).
        drop(shards);
        self.handlers.engine().close().await;
    }
}

/// The next client of the Unix socket; never, without one.
async fn accept_local(unix: Option<&UnixSocket>) -> std::io::Result<UnixStream> {
    match unix {
        Some(unix) => unix.listener.accept().await.map(|(socket, _)| socket),
        None => std::future::pending().await,
    }
}
