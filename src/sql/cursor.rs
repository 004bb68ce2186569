//! SQL cursors: `DECLARE name CURSOR [WITH HOLD] FOR query`, `FETCH`, `MOVE`,
//! `CLOSE`. A cursor keeps its query's running stream and hands out the
//! next rows on each FETCH, so a client reads a large result in pieces
//! without the whole of it ever being held. Cursors read forward only (as
//! PostgreSQL's `NO SCROLL` cursors); asking to go back is an error.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Span, Token, Tokenizer};
use futures::StreamExt;

use super::error::{Result, SqlError};
use super::session::normalize;

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

/// A FETCH or MOVE, read from its words as PostgreSQL's grammar has them:
/// `FETCH [ direction ] [ FROM | IN ] cursor_name`, the direction one of
/// NEXT, PRIOR, FIRST, LAST, ABSOLUTE n, RELATIVE n, n, ALL, FORWARD
/// [n | ALL] and BACKWARD [n | ALL] (NEXT when none is given). The SQL
/// parser reads only some of these forms, and not MOVE.
pub struct Fetch {
    pub cursor: String,
    /// How many rows it asks for; `None` is all the rest.
    pub count: Option<usize>,
    /// MOVE: the rows are skipped, not sent.
    pub skip: bool,
}

impl Fetch {
    /// `None` when the text is not a FETCH or MOVE.
    pub fn read(sql: &str) -> Option<Result<Fetch>> {
        let first = sql.split_whitespace().next()?;
        let skip = first.eq_ignore_ascii_case("move");
        if !skip && !first.eq_ignore_ascii_case("fetch") {
            return None;
        }
        let tokens = match Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() {
            Ok(tokens) => tokens,
            Err(e) => return Some(Err(SqlError::Syntax(e.to_string()))),
        };
        let mut words = tokens
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF));
        words.next();
        Some(Self::read_rest(words.collect(), skip))
    }

    /// The direction, FROM or IN, and the cursor's name.
    fn read_rest(words: Vec<Token>, skip: bool) -> Result<Fetch> {
        let (count, mut at) = direction(&words)?;
        if words
            .get(at)
            .is_some_and(|t| matches!(keyword(t).as_str(), "FROM" | "IN"))
        {
            at += 1;
        }
        let command = if skip { "MOVE" } else { "FETCH" };
        let cursor = match words.get(at) {
            Some(Token::Word(w)) => normalize(&w.to_ident(Span::empty())),
            _ => return Err(SqlError::Syntax(format!("{command} needs a cursor name"))),
        };
        if let Some(extra) = words.get(at + 1) {
            return Err(SqlError::Syntax(format!(
                "unexpected \"{extra}\" after the cursor name in {command}"
            )));
        }
        Ok(Fetch {
            cursor,
            count,
            skip,
        })
    }
}

/// A FETCH's direction as a count of rows forward (`None`: all the rest),
/// and how many words it took.
fn direction(words: &[Token]) -> Result<(Option<usize>, usize)> {
    let rows = |n: &str| match n.parse::<usize>() {
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(SqlError::Syntax(format!("invalid FETCH count {n}"))),
    };
    let Some(first) = words.first() else {
        return Ok((Some(1), 0));
    };
    match first {
        Token::Minus => Err(backward()),
        Token::Number(n, _) => Ok((rows(n)?, 1)),
        _ => match keyword(first).as_str() {
            "NEXT" => Ok((Some(1), 1)),
            "ALL" => Ok((None, 1)),
            "FORWARD" => match words.get(1) {
                Some(Token::Number(n, _)) => Ok((rows(n)?, 2)),
                Some(Token::Minus) => Err(backward()),
                Some(t) if keyword(t) == "ALL" => Ok((None, 2)),
                _ => Ok((Some(1), 1)),
            },
            "PRIOR" | "FIRST" | "LAST" | "ABSOLUTE" | "RELATIVE" | "BACKWARD" => Err(backward()),
            // The cursor's name, or FROM / IN before it.
            _ => Ok((Some(1), 0)),
        },
    }
}

/// An unquoted word, in upper case (empty for anything else).
fn keyword(token: &Token) -> String {
    match token {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => String::new(),
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
