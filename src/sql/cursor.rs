//! SQL cursors: `DECLARE name CURSOR [WITH HOLD] FOR query`, `FETCH`, `MOVE`,
//! `CLOSE`. A cursor keeps its query's running stream and hands out the
//! next rows on each FETCH, so a client reads a large result in pieces
//! without the whole of it ever being held. Cursors read forward only (as
//! PostgreSQL's `NO SCROLL` cursors); asking to go back is an error.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::sql::sqlparser::ast::FetchDirection;
use futures::StreamExt;

use super::error::{Result, SqlError};

pub struct Cursor {
    pub schema: SchemaRef,
    /// Only ever reached through `&mut self` (`get_mut`, no locking); the
    /// mutex makes a session that holds cursors shareable between threads.
    stream: tokio::sync::Mutex<SendableRecordBatchStream>,
    /// Rows read from the stream and not yet fetched.
    pending: Option<RecordBatch>,
    /// Survives the end of the transaction that declared it.
    pub hold: bool,
    /// Declared inside the current transaction block (a ROLLBACK closes it).
    pub in_block: bool,
}

/// How many rows a FETCH or MOVE asks for; `None` is all the rest.
pub fn count(direction: &FetchDirection) -> Result<Option<usize>> {
    use FetchDirection as D;
    let number = |v: &datafusion::sql::sqlparser::ast::ValueWithSpan| -> Result<Option<usize>> {
        let text = v.to_string();
        match text.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(n as usize)),
            Ok(_) => Err(backward()),
            Err(_) => Err(SqlError::Syntax(format!("invalid FETCH count {text}"))),
        }
    };
    match direction {
        D::Next => Ok(Some(1)),
        D::Count { limit } => number(limit),
        D::Forward { limit: Some(limit) } => number(limit),
        D::Forward { limit: None } => Ok(Some(1)),
        D::All | D::ForwardAll => Ok(None),
        D::Prior
        | D::First
        | D::Last
        | D::Absolute { .. }
        | D::Relative { .. }
        | D::Backward { .. }
        | D::BackwardAll => Err(backward()),
    }
}

fn backward() -> SqlError {
    SqlError::value(
        "55000",
        "cursor can only scan forward (tablegate's cursors are NO SCROLL)",
    )
}

impl Cursor {
    pub fn new(
        schema: SchemaRef,
        stream: SendableRecordBatchStream,
        hold: bool,
        in_block: bool,
    ) -> Self {
        Cursor {
            schema,
            stream: tokio::sync::Mutex::new(stream),
            pending: None,
            hold,
            in_block,
        }
    }

    /// The next `count` rows (all the rest for `None`), as batches.
    pub async fn take(&mut self, count: Option<usize>) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut wanted = count.unwrap_or(usize::MAX);
        while wanted > 0 {
            let batch = match self.pending.take() {
                Some(b) => b,
                None => match self.stream.get_mut().next().await {
                    Some(b) => b?,
                    None => break,
                },
            };
            if batch.num_rows() > wanted {
                self.pending = Some(batch.slice(wanted, batch.num_rows() - wanted));
                out.push(batch.slice(0, wanted));
                break;
            }
            wanted -= batch.num_rows();
            out.push(batch);
        }
        Ok(out)
    }
}
