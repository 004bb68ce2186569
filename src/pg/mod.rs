//! The wire layer: a PostgreSQL-protocol server over SQL sessions.
//!
//! - `connection`: one connection's loop: TLS, then each message to
//!   pgwire's dispatcher.
//! - `frames`: frame checks ahead of pgwire's decoder (FATAL 08P01 for a
//!   bad frame).
//! - `handler`: pgwire's simple and extended query handlers; a connection's
//!   session lives in its extensions.
//! - `encode`: Arrow results to row descriptions and data rows.
//! - `params`: parameter types and values.
//! - `error`: every error's SQLSTATE, in one match.
//! - `auth`: trust or SCRAM-SHA-256, and TLS.
//! - `cancel`: cancel requests that stop queries while their rows stream.
//! - `limit`: the connection limit (SQLSTATE 53300 past it).
//! - `idle`: `idle_in_transaction_session_timeout` (FATAL 25P03).
//! - `replies`: replies held until the client's Sync or Flush, with the
//!   session's notices sent ahead of each statement's last reply.
//! - `shards`: the connection threads, two per core, each connection on one.
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
mod limit;
mod params;
mod replies;
mod shards;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

pub use auth::{tls_acceptor, Authentication, Users};
pub use error::sqlstate;
pub use limit::DEFAULT_MAX_CONNECTIONS;
pub use pgwire::tokio::TlsAcceptor;

use crate::sql::Engine;

/// A listening server.
pub struct Server {
    listener: TcpListener,
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

    /// Serves connections until `shutdown` completes; then, or when this
    /// future is dropped, the open connections are closed.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut shards = self.shards;
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                accepted = self.listener.accept() => match accepted {
                    Ok((socket, peer)) => {
                        let Some(slot) = self.connections.take() else {
                            tracing::warn!(%peer, "connection refused: too many clients");
                            tokio::spawn(limit::refuse(socket));
                            continue;
                        };
                        // The socket moves to its thread's runtime.
                        let socket = match socket.into_std() {
                            Ok(socket) => socket,
                            Err(e) => {
                                tracing::warn!(%peer, "cannot hand over the connection: {e}");
                                continue;
                            }
                        };
                        let handlers = self.handlers.clone();
                        let tls = self.tls.clone();
                        shards.spawn(async move {
                            let served = match TcpStream::from_std(socket) {
                                Ok(socket) => connection::serve(socket, tls, handlers).await,
                                Err(e) => Err(e),
                            };
                            if let Err(e) = served {
                                tracing::debug!(%peer, "connection ended with an error: {e}");
                            }
                            drop(slot);
                        });
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                },
            }
        }
    }
}
