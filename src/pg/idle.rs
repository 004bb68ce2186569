//! `idle_in_transaction_session_timeout`: a connection that sits in an
//! open transaction block longer than the limit between two messages loses
//! its block (what it wrote is dropped at once) and gets FATAL 25P03 and
//! is closed, as in PostgreSQL.

use std::sync::{Arc, Mutex};

use pgwire::error::{ErrorInfo, PgWireError};
use tokio::sync::{Mutex as AsyncMutex, Notify};

use crate::sql::Session;

/// The idle timer of one connection.
#[derive(Default)]
pub struct IdleWatch {
    state: Mutex<State>,
    /// Told when the timer ends the session.
    ended: Notify,
}

#[derive(Default)]
struct State {
    /// Bumped by every message, so a timer armed before it does nothing.
    generation: u64,
    expired: bool,
}

impl IdleWatch {
    pub const MESSAGE: &str = "terminating connection due to idle-in-transaction timeout";

    /// A message arrived: stops the timer. Errs when the timer had already
    /// ended the session (the message raced the connection's closing).
    pub fn message(&self) -> Result<(), PgWireError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.generation += 1;
        if state.expired {
            let error = ErrorInfo::new("FATAL".into(), "25P03".into(), Self::MESSAGE.into());
            return Err(PgWireError::UserError(Box::new(error)));
        }
        Ok(())
    }

    /// Completes when the timer has ended the session.
    pub async fn expired(&self) {
        self.ended.notified().await;
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
            watch.ended.notify_one();
        });
    }
}
