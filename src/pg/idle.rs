//! `idle_in_transaction_session_timeout`: a connection that sits in an
//! open transaction block longer than the limit between two messages loses
//! its block (what it wrote is dropped at once) and, at its next message,
//! gets FATAL 25P03 and is closed, as in PostgreSQL.

use std::sync::{Arc, Mutex};

use pgwire::error::{ErrorInfo, PgWireError};
use tokio::sync::Mutex as AsyncMutex;

use crate::sql::Session;

/// The idle timer of one connection.
#[derive(Default)]
pub struct IdleWatch {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Bumped by every message, so a timer armed before it does nothing.
    generation: u64,
    expired: bool,
}

impl IdleWatch {
    /// A message arrived: stops the timer. Errs when the timer had already
    /// ended the session.
    pub fn message(&self) -> Result<(), PgWireError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.generation += 1;
        if state.expired {
            let error = ErrorInfo::new(
                "FATAL".into(),
                "25P03".into(),
                "terminating connection due to idle-in-transaction timeout".into(),
            );
            return Err(PgWireError::UserError(Box::new(error)));
        }
        Ok(())
    }

    /// The replies of a message were sent: when the session waits in an
    /// open block with a limit set, starts the timer.
    pub fn replied(self: &Arc<Self>, session: &Arc<AsyncMutex<Session>>, idle: &Session) {
        let Some(limit) = idle.idle_in_transaction_timeout() else {
            return;
        };
        let armed = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .generation;
        let (watch, session) = (self.clone(), session.clone());
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            {
                let mut state = watch.state.lock().unwrap_or_else(|e| e.into_inner());
                if state.generation != armed {
                    return;
                }
                state.expired = true;
            }
            tracing::info!("closing a connection idle in a transaction block for {limit:?}");
            session.lock().await.abandon_transaction().await;
        });
    }
}
