use datafusion::error::DataFusionError;

use crate::catalog::{CatalogError, KeyError, RowError};
use crate::store::StoreError;

/// An error of the SQL layer. The wire layer turns each variant into a
/// SQLSTATE in one place (`pg::error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    #[error("syntax error: {0}")]
    Syntax(String),
    #[error("{0}")]
    FeatureNotSupported(String),
    #[error("{0}")]
    InvalidDefinition(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Row(#[from] RowError),
    /// A value that does not fit its column: too long, out of range, malformed.
    #[error("{message}")]
    InvalidValue {
        sqlstate: &'static str,
        message: String,
    },
    #[error(
        "duplicate key value violates unique constraint \"{table}_pkey\": Key {key} already exists."
    )]
    UniqueViolation { table: String, key: String },
    #[error("could not serialize access due to concurrent update of {0}")]
    SerializationFailure(String),
    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    InFailedTransaction,
    #[error("{0}")]
    InvalidTransactionState(String),
    /// A statement for one kind of relation on another (a write to a
    /// materialized view, say).
    #[error("{0}")]
    WrongObjectType(String),
    /// A column a statement names that its table does not have; `table`
    /// where the statement writes the column (INSERT's list, UPDATE's SET).
    #[error(
        "column \"{column}\"{} does not exist",
        table.as_ref().map(|t| format!(" of relation \"{t}\"")).unwrap_or_default()
    )]
    UndefinedColumn {
        column: String,
        table: Option<String>,
    },
    #[error("{0}")]
    DataFusion(#[from] DataFusionError),
    /// An error with where it happened, as PostgreSQL's CONTEXT gives it
    /// (`COPY t, line 3, column d: "x"`).
    #[error("{error}")]
    InContext {
        error: Box<SqlError>,
        context: String,
    },
    /// An error with PostgreSQL's DETAIL and HINT lines.
    #[error("{error}")]
    Explained {
        error: Box<SqlError>,
        detail: Option<String>,
        hint: Option<String>,
    },
    /// A broken invariant of the gateway itself.
    #[error("internal error: {0}")]
    Internal(String),
}

/// An error of a function or cast run by DataFusion, carried through its
/// execution as an external error whose SQLSTATE the wire reads back.
impl From<SqlError> for DataFusionError {
    fn from(error: SqlError) -> Self {
        DataFusionError::External(Box::new(error))
    }
}

impl SqlError {
    /// The error of a query whose execution panicked, read from the
    /// panic's message: a column of texts or arrays past 2 GB in one batch
    /// of rows (Arrow's offsets overflow) is 54000, as a value past
    /// PostgreSQL's 1 GB is; anything else is internal, and says what
    /// happened.
    pub fn of_panic(payload: Box<dyn std::any::Any + Send>) -> SqlError {
        let message = match payload.downcast::<String>() {
            Ok(message) => *message,
            Err(payload) => payload.downcast_ref::<&str>().map_or("", |m| m).to_owned(),
        };
        if message.contains("offset overflow") {
            SqlError::value(
                "54000",
                "the values of a column in one batch of rows came to more than 2 GB",
            )
        } else {
            SqlError::Internal(format!("the query's execution stopped: {message}"))
        }
    }

    /// This error with a DETAIL and a HINT.
    pub fn explained(self, detail: Option<String>, hint: Option<String>) -> Self {
        SqlError::Explained {
            error: Box::new(self),
            detail,
            hint,
        }
    }

    /// A column of no table the statement reads.
    pub fn undefined_column(column: impl Into<String>) -> Self {
        SqlError::UndefinedColumn {
            column: column.into(),
            table: None,
        }
    }

    /// A column `table` does not have.
    pub fn undefined_column_of(column: impl Into<String>, table: impl Into<String>) -> Self {
        SqlError::UndefinedColumn {
            column: column.into(),
            table: Some(table.into()),
        }
    }

    pub fn value(sqlstate: &'static str, message: impl Into<String>) -> Self {
        SqlError::InvalidValue {
            sqlstate,
            message: message.into(),
        }
    }

    /// A text that does not read as a value of the type PostgreSQL names
    /// `name` (`integer`, `boolean`): 22P02 `invalid input syntax for type
    /// integer: "12x"`, or 22003 `value "99999" is out of range for type
    /// smallint` for digits an integer type cannot hold.
    pub fn unreadable(text: &str, name: &str) -> Self {
        let trimmed = text.trim();
        let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
        let integer = matches!(name, "smallint" | "integer" | "bigint");
        if integer && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return SqlError::value(
                "22003",
                format!("value \"{text}\" is out of range for type {name}"),
            );
        }
        SqlError::value(
            "22P02",
            format!("invalid input syntax for type {name}: \"{text}\""),
        )
    }

    /// A statement that ran past `statement_timeout`.
    pub fn statement_timeout() -> Self {
        SqlError::value("57014", "canceling statement due to statement timeout")
    }
}

impl From<datafusion::arrow::error::ArrowError> for SqlError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        SqlError::DataFusion(DataFusionError::ArrowError(Box::new(e), None))
    }
}

pub type Result<T, E = SqlError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_that_says_what_happened() {
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        let overflow = SqlError::of_panic(caught(|| panic!("offset overflow")));
        assert!(
            matches!(
                overflow,
                SqlError::InvalidValue {
                    sqlstate: "54000",
                    ..
                }
            ),
            "{overflow:?}"
        );
        let other = SqlError::of_panic(caught(|| panic!("index {} out of bounds", 7)));
        assert_eq!(
            other.to_string(),
            "internal error: the query's execution stopped: index 7 out of bounds"
        );
    }
}
