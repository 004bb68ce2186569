//! The portal of a statement read by key, kept by its connection rather
//! than in pgwire's portal store.
//!
//! A prepared point select is a Bind, an Execute and a Sync (libpq adds a
//! Describe of the portal). Through pgwire, the Bind puts a portal in the
//! connection's store, the Describe and the Execute look it up again, and
//! the Execute starts the portal's execution state and takes its rows back
//! out of it, each step behind a lock. Under pgbench's prepared point
//! selects that bookkeeping cost the server about 6 µs of its 54 µs a query
//! (BENCHMARKS.md, "Prepared point selects without pgwire's portal
//! store"). Here the connection keeps
//! the last portal bound to a statement read by key
//! (`Prepared::skips_planning`), with its parameters' values, and answers
//! its Describe and Execute itself. Whatever else the protocol allows with
//! a portal (an Execute with a row limit, a read the general path must
//! run, another portal bound while this one is kept) first hands the
//! portal to pgwire's store, which goes on from the same state.

use std::fmt::Debug;
use std::sync::Arc;

use datafusion::common::ParamValues;
use futures::Sink;
use pgwire::api::portal::{Portal, PortalExecutionState};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, DEFAULT_NAME};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::extendedquery::TARGET_TYPE_BYTE_PORTAL;
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::handler::Handlers;
use crate::sql::Prepared;

/// A connection's portal of a statement read by key, if it keeps one.
#[derive(Default)]
pub struct KeyPortal {
    kept: Option<Kept>,
}

/// A portal bound to a statement read by key, and its parameters' values.
pub struct Kept {
    pub portal: Portal<Arc<Prepared>>,
    pub values: ParamValues,
    /// Its rows were sent: another Execute gets none, as from a finished
    /// portal.
    pub finished: bool,
}

impl Kept {
    pub fn new(portal: Portal<Arc<Prepared>>, values: ParamValues) -> Kept {
        Kept {
            portal,
            values,
            finished: false,
        }
    }
}

impl KeyPortal {
    /// Answers `message` when it binds a statement read by key or names
    /// the kept portal; otherwise returns it for pgwire's dispatcher.
    pub async fn handle<C>(
        &mut self,
        handlers: &Handlers,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<Option<PgWireFrontendMessage>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // After an error pgwire drops the messages up to the Sync.
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Ok(Some(message));
        }
        match message {
            PgWireFrontendMessage::Bind(bind) => {
                let name = bind.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
                let statement = match client.portal_store().get_statement(name) {
                    Some(Entry::Value(statement)) if statement.statement.skips_planning() => {
                        statement
                    }
                    _ => {
                        // pgwire binds it, in place of the kept portal of its name.
                        self.forget(bind.portal_name.as_deref().unwrap_or(DEFAULT_NAME));
                        return Ok(Some(PgWireFrontendMessage::Bind(bind)));
                    }
                };
                let portal = Portal::try_new(&bind, statement)?;
                // The kept portal goes to pgwire's store unless this one
                // takes its name; one bound through pgwire under this name
                // is replaced.
                if let Some(other) = self.kept.take() {
                    if other.portal.name != portal.name {
                        hand_over(client, other).await;
                    }
                }
                client.portal_store().rm_portal(&portal.name);
                self.kept = Some(handlers.bind_kept(client, portal).await?);
                Ok(None)
            }
            PgWireFrontendMessage::Describe(describe)
                if describe.target_type == TARGET_TYPE_BYTE_PORTAL
                    && self.holds(describe.name.as_deref()) =>
            {
                let kept = self.kept.as_ref().expect("held");
                handlers.describe_kept(client, kept).await?;
                Ok(None)
            }
            PgWireFrontendMessage::Execute(execute) if self.holds(execute.name.as_deref()) => {
                let kept = self.kept.as_mut().expect("held");
                if execute.max_rows == 0 && handlers.execute_kept(client, kept).await? {
                    return Ok(None);
                }
                // Rows in pieces (pgwire's portal suspends and resumes), or
                // a read the general path runs: from pgwire's store.
                if let Some(kept) = self.kept.take() {
                    hand_over(client, kept).await;
                }
                Ok(Some(PgWireFrontendMessage::Execute(execute)))
            }
            PgWireFrontendMessage::Close(close) if close.target_type == TARGET_TYPE_BYTE_PORTAL => {
                // pgwire answers CloseComplete.
                self.forget(close.name.as_deref().unwrap_or(DEFAULT_NAME));
                Ok(Some(PgWireFrontendMessage::Close(close)))
            }
            other => Ok(Some(other)),
        }
    }

    /// After a Sync or a simple query: a transaction that ended took its
    /// portals with it, as in PostgreSQL (the implicit one of a Sync
    /// outside a block too).
    pub fn transaction_ended<C>(&mut self, client: &C)
    where
        C: ClientInfo + ClientPortalStore,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
    {
        if matches!(client.transaction_status(), TransactionStatus::Idle) {
            self.kept = None;
            client.portal_store().clear_portals();
        }
    }

    fn name(&self) -> Option<&str> {
        self.kept.as_ref().map(|kept| kept.portal.name.as_str())
    }

    fn holds(&self, name: Option<&str>) -> bool {
        self.name() == Some(name.unwrap_or(DEFAULT_NAME))
    }

    fn forget(&mut self, name: &str) {
        if self.name() == Some(name) {
            self.kept = None;
        }
    }
}

/// Puts a kept portal in pgwire's store, finished if its rows were sent.
async fn hand_over<C>(client: &C, kept: Kept)
where
    C: ClientPortalStore,
    C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
{
    if kept.finished {
        *kept.portal.state.lock().await = PortalExecutionState::Finished;
    }
    client.portal_store().put_portal(Arc::new(kept.portal));
}
