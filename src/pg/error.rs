//! Errors to SQLSTATEs: the one place where every error of the layers below
//! gets its PostgreSQL code.

use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use pgwire::api::DEFAULT_NAME;
use pgwire::error::{ErrorInfo, PgWireError};

use crate::catalog::{CatalogError, KeyError, RowError};
use crate::model::ModelError;
use crate::sql::SqlError;
use crate::store::StoreError;

pub fn error_info(e: &SqlError) -> ErrorInfo {
    // An error a function raised inside DataFusion's execution, with its
    // DETAIL and HINT.
    if let SqlError::DataFusion(d) = e {
        if let DataFusionError::External(inner) = d.find_root() {
            if let Some(inner) = inner.downcast_ref::<SqlError>() {
                return error_info(inner);
            }
        }
    }
    if let SqlError::InContext { error, context } = e {
        let mut info = error_info(error);
        info.where_context = Some(context.clone());
        return info;
    }
    if let SqlError::Explained {
        error,
        detail,
        hint,
    } = e
    {
        let mut info = error_info(error);
        info.detail = detail.clone().or(info.detail);
        info.hint = hint.clone().or(info.hint);
        return info;
    }
    let (message, detail) = match e {
        SqlError::Syntax(m) => syntax_message(m),
        e => with_detail(message(e)),
    };
    let mut info = ErrorInfo::new("ERROR".to_owned(), sqlstate(e).to_owned(), message);
    info.detail = detail;
    if info.message.starts_with("function ") && info.code == "42883" {
        info.hint = Some(
            "No function matches the given name and argument types. You might need to add \
             explicit type casts."
                .into(),
        );
    }
    info
}

/// An error's information with where in `sql` it is, as PostgreSQL gives
/// it (ErrorResponse's position, a 1-based character index that psql
/// underlines): a syntax error's token, and the first mention of the
/// relation or column an undefined-table or undefined-column error names.
pub fn error_info_in(e: &SqlError, sql: &str) -> ErrorInfo {
    let mut info = error_info(e);
    info.position = position(sql, &info).map(|p| p.to_string());
    info
}

fn position(sql: &str, info: &ErrorInfo) -> Option<usize> {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::{Location, Token, Tokenizer};
    // A line and column (from 1) as a character index (from 1).
    let index = |at: Location| -> Option<usize> {
        let line = usize::try_from(at.line).ok()?.checked_sub(1)?;
        let before: usize = sql
            .split('\n')
            .take(line)
            .map(|l| l.chars().count() + 1)
            .sum();
        Some(before + usize::try_from(at.column).ok()?)
    };
    if info.code == "42601" {
        let (_, at) = info.detail.as_deref()?.rsplit_once(" at Line: ")?;
        let (line, column) = at.split_once(", Column: ")?;
        return index(Location {
            line: line.trim().parse().ok()?,
            column: column.trim().parse().ok()?,
        });
    }
    // The words the error names: `relation "t"`, `column "c"`, `column t.c`.
    let named = |prefix: &str| -> Option<Vec<String>> {
        let rest = info.message.strip_prefix(prefix)?;
        let (name, _) = rest
            .split_once(" does not exist")
            .or_else(|| rest.split_once(" of relation "))?;
        Some(
            match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
                Some(quoted) => vec![quoted.to_owned()],
                None => name.split('.').map(str::to_owned).collect(),
            },
        )
    };
    // ALTER and DROP find their relations and columns in the catalog, and
    // PostgreSQL points at none.
    let first = sql.split_whitespace().next().unwrap_or("");
    if ["alter", "drop"]
        .iter()
        .any(|w| first.eq_ignore_ascii_case(w))
    {
        return None;
    }
    let words = match info.code.as_str() {
        "42P01" => named("relation ")?,
        "42703" => named("column ")?,
        _ => return None,
    };
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let tokens: Vec<_> = tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let word = |token: &Token| match token {
        Token::Word(w) if w.quote_style.is_some() => Some(w.value.clone()),
        Token::Word(w) => Some(w.value.to_lowercase()),
        _ => None,
    };
    // The words in order, a period between each two.
    let span = words.len() * 2 - 1;
    (0..tokens.len().saturating_sub(span - 1)).find_map(|i| {
        let matches = words.iter().enumerate().all(|(n, w)| {
            word(&tokens[i + 2 * n].token).as_deref() == Some(w.as_str())
                && (n == 0 || tokens[i + 2 * n - 1].token == Token::Period)
        });
        matches.then(|| index(tokens[i].span.start)).flatten()
    })
}

/// The SQL parser's error in PostgreSQL's words (`syntax error at or near
/// "c"`, `syntax error at end of input`), what it expected in the DETAIL.
fn syntax_message(message: &str) -> (String, Option<String>) {
    let Some(parser) = message.strip_prefix("sql parser error: ") else {
        return (format!("syntax error: {message}"), None);
    };
    let found = parser.split_once(", found: ").map(|(_, found)| {
        found
            .rsplit_once(" at Line: ")
            .map_or(found, |(token, _)| token)
    });
    match found {
        Some("EOF") => ("syntax error at end of input".into(), Some(parser.into())),
        Some(token) => (
            format!("syntax error at or near \"{token}\""),
            Some(parser.into()),
        ),
        None => (format!("syntax error: {parser}"), None),
    }
}

/// A unique violation's key goes in the error's DETAIL, as PostgreSQL
/// sends it ("Key (id)=(5) already exists.").
fn with_detail(message: String) -> (String, Option<String>) {
    const UNIQUE: &str = "duplicate key value violates unique constraint ";
    match message.split_once(": Key (") {
        Some((head, key)) if head.starts_with(UNIQUE) => {
            (head.to_owned(), Some(format!("Key ({key}")))
        }
        _ => (message, None),
    }
}

/// The message of an error; one of tablegate's own raised inside DataFusion
/// (by a function, say) without DataFusion's wrapping, and a number too
/// large for its type, or a division by zero, in PostgreSQL's words.
fn message(e: &SqlError) -> String {
    if let SqlError::DataFusion(d) = e {
        let root = d.find_root();
        if let Some(message) = planning_message(root) {
            return message;
        }
        match root {
            DataFusionError::External(inner) => return inner.to_string(),
            DataFusionError::ArrowError(a, _) => match a.as_ref() {
                ArrowError::CastError(m) => {
                    if let Some(ty) = narrowing_cast(m) {
                        return format!("{ty} out of range");
                    }
                    if let Some(unread) = unread_text(m) {
                        return unread.to_string();
                    }
                    return m.clone();
                }
                ArrowError::ParseError(m) | ArrowError::ComputeError(m) => {
                    return unread_interval(m).unwrap_or_else(|| m.clone())
                }
                ArrowError::InvalidArgumentError(m) => {
                    if let Some(overflow) = numeric_overflow(m) {
                        return overflow;
                    }
                }
                ArrowError::DivideByZero => return "division by zero".into(),
                _ => {}
            },
            _ => {}
        }
    }
    e.to_string()
}

/// DataFusion's errors of planning in PostgreSQL's words: a column or a
/// table not found, an ambiguous column, a function not found or not
/// taking its arguments' types, a column neither grouped nor aggregated.
fn planning_message(e: &DataFusionError) -> Option<String> {
    match e {
        DataFusionError::SchemaError(schema, _) => match schema.as_ref() {
            SchemaError::FieldNotFound { field, .. } => Some(match &field.relation {
                Some(relation) => format!("column {relation}.{} does not exist", field.name),
                None => format!("column \"{}\" does not exist", field.name),
            }),
            SchemaError::AmbiguousReference { field } => {
                Some(format!("column reference \"{}\" is ambiguous", field.name))
            }
            _ => None,
        },
        DataFusionError::Plan(m) => {
            if let Some(rest) = m.strip_prefix("table '") {
                let table = rest.split_once("' not found")?.0;
                let table = table.rsplit('.').next()?;
                return Some(format!("relation \"{table}\" does not exist"));
            }
            if let Some(rest) = m.strip_prefix("Invalid function '") {
                let function = rest.split_once('\'')?.0;
                return Some(format!("function {function} does not exist"));
            }
            if let Some((_, rest)) =
                m.split_once("No function matches the given name and argument types '")
            {
                let call = rest.split_once("'.")?.0;
                return Some(format!(
                    "function {} does not exist",
                    call_in_sql_types(call)?
                ));
            }
            if let Some((_, rest)) = m.split_once("column \"") {
                let (column, rest) = rest.split_once('"')?;
                if rest.starts_with(" must appear in the GROUP BY clause") {
                    return Some(format!(
                        "column \"{column}\" must appear in the GROUP BY clause or be used in an \
                         aggregate function"
                    ));
                }
            }
            None
        }
        _ => None,
    }
}

/// `sum(Utf8)` as `sum(text)`; `None` when a type has no SQL name.
fn call_in_sql_types(call: &str) -> Option<String> {
    let (function, arguments) = call.strip_suffix(')')?.split_once('(')?;
    // The arguments' types, split at the commas outside parentheses.
    let mut types = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in arguments.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                types.push(&arguments[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    types.push(&arguments[start..]);
    let names = types
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| crate::sql::types::sql_name(&t.trim().parse().ok()?))
        .collect::<Option<Vec<_>>>()?;
    Some(format!("{function}({})", names.join(", ")))
}

/// The SQL name of the type of a cast that failed because the type cannot
/// hold the number ("Can't cast value 4000000000 to type Int32").
fn narrowing_cast(message: &str) -> Option<&'static str> {
    let ty = message
        .strip_prefix("Can't cast value ")?
        .rsplit(" to type ")
        .next()?;
    Some(match ty {
        "Int16" => "smallint",
        "Int32" => "integer",
        "Int64" => "bigint",
        _ => "value",
    })
}

/// A text a cast could not read as a number, a truth value or a time of
/// day (Arrow's "Cannot cast string '12x' to value of Int32 type"), as
/// PostgreSQL reports it ([`SqlError::unreadable`]; a time's is 22007, as
/// a date's).
fn unread_text(message: &str) -> Option<SqlError> {
    let rest = message
        .strip_prefix("Cannot cast string '")
        .or_else(|| message.strip_prefix("Cannot cast value '"))?;
    let (text, ty) = rest.rsplit_once("' to value of ")?;
    let ty: DataType = ty.strip_suffix(" type")?.parse().ok()?;
    if matches!(ty, DataType::Time32(_) | DataType::Time64(_)) {
        let message = format!("invalid input syntax for type time: \"{text}\"");
        return Some(SqlError::value("22007", message));
    }
    // A number too large for the numeric's precision (`'1e30'::numeric`
    // in a numeric of 38 digits, 10 of them decimals).
    if let DataType::Decimal128(precision, scale) = ty {
        if text.trim().parse::<f64>().is_ok_and(f64::is_finite) {
            let scale = u32::try_from(scale).unwrap_or_default();
            let message = overflow_words(u32::from(precision), scale);
            return Some(SqlError::value("22003", message));
        }
    }
    if !(ty.is_numeric() || ty == DataType::Boolean) {
        return None;
    }
    Some(SqlError::unreadable(
        text,
        &crate::sql::types::sql_name(&ty)?,
    ))
}

/// A text Arrow could not read as an interval ("Invalid input syntax for
/// type interval: \"forever\""), in PostgreSQL's words.
fn unread_interval(message: &str) -> Option<String> {
    let text = message.strip_prefix("Invalid input syntax for type interval: ")?;
    Some(format!("invalid input syntax for type interval: {text}"))
}

/// PostgreSQL's words for a number too large for a `numeric(p, s)` column
/// ("123456789.12 is too large to store in a Decimal128 of precision 10.
/// Max is 99999999.99").
fn numeric_overflow(message: &str) -> Option<String> {
    let (_, rest) = message.split_once(" is too large to store in a Decimal128 of precision ")?;
    let (precision, max) = rest.split_once(". Max is ")?;
    let precision: u32 = precision.parse().ok()?;
    let scale = max
        .split_once('.')
        .map_or(0, |(_, fraction)| fraction.len()) as u32;
    Some(overflow_words(precision, scale))
}

/// PostgreSQL's message and DETAIL for a number a `numeric(precision,
/// scale)` cannot hold, in one line.
fn overflow_words(precision: u32, scale: u32) -> String {
    format!(
        "numeric field overflow: a field with precision {precision}, scale {scale} must round \
         to an absolute value less than 10^{}",
        precision.saturating_sub(scale)
    )
}

impl From<SqlError> for PgWireError {
    fn from(e: SqlError) -> Self {
        to_pgwire(e)
    }
}

/// An error of the protocol's own (a portal or a statement the client
/// names that does not exist), in PostgreSQL's words and SQLSTATE; pgwire
/// gives both kinds 26000 and calls the unnamed one by its own key.
pub fn protocol_error(error: PgWireError) -> ErrorInfo {
    let (code, message) = match error {
        PgWireError::PortalNotFound(name) if name == DEFAULT_NAME => {
            ("34000", "portal \"\" does not exist".to_owned())
        }
        PgWireError::PortalNotFound(name) => ("34000", format!("portal \"{name}\" does not exist")),
        PgWireError::StatementNotFound(name) if name == DEFAULT_NAME => (
            "26000",
            "unnamed prepared statement does not exist".to_owned(),
        ),
        PgWireError::StatementNotFound(name) => (
            "26000",
            format!("prepared statement \"{name}\" does not exist"),
        ),
        error => return ErrorInfo::from(error),
    };
    ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message)
}

pub fn to_pgwire(e: SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(&e)))
}

pub fn sqlstate(e: &SqlError) -> &'static str {
    match e {
        SqlError::Syntax(_) => "42601",
        SqlError::FeatureNotSupported(_) => "0A000",
        SqlError::InvalidDefinition(_) => "42P16",
        SqlError::Catalog(c) => catalog_state(c),
        SqlError::Store(s) => store_state(s),
        SqlError::Key(k) => key_state(k),
        SqlError::Row(r) => row_state(r),
        SqlError::InvalidValue { sqlstate, .. } => sqlstate,
        SqlError::UniqueViolation { .. } => "23505",
        SqlError::SerializationFailure(_) => "40001",
        SqlError::InFailedTransaction => "25P02",
        SqlError::InvalidTransactionState(_) => "25000",
        SqlError::UndefinedColumn { .. } => "42703",
        SqlError::WrongObjectType(_) => "42809",
        SqlError::DataFusion(d) => datafusion_state(d),
        SqlError::InContext { error, .. } | SqlError::Explained { error, .. } => sqlstate(error),
        SqlError::Internal(_) => "XX000",
    }
}

fn catalog_state(e: &CatalogError) -> &'static str {
    match e {
        CatalogError::InvalidSequence(_) => "22023",
        CatalogError::UniqueIndex { .. } => "23505",
        CatalogError::Row(r) => row_state(r),
        CatalogError::TableExists(_) => "42P07",
        CatalogError::TableNotFound(_) => "42P01",
        CatalogError::InvalidDefinition(_) => "42P16",
        CatalogError::ChangedConcurrently(_) => "40001",
        CatalogError::Dependent(_) => "2BP01",
        CatalogError::RoleExists(_) => "42710",
        CatalogError::RoleNotFound(_) | CatalogError::TypeNotFound(_) => "42704",
        CatalogError::TypeExists(_) => "42710",
        CatalogError::TimedOut => "57014",
        CatalogError::Store(s) => store_state(s),
    }
}

fn store_state(e: &StoreError) -> &'static str {
    match e {
        StoreError::TableNotFound(_) => "42P01",
        StoreError::TableAlreadyExists(_) => "42P07",
        StoreError::EntityAlreadyExists { .. } => "23505",
        StoreError::ConditionNotMet { .. } | StoreError::EntityNotFound { .. } => "40001",
        StoreError::Model(m) => model_state(m),
        StoreError::BatchOperationFailed { source, .. } => store_state(source),
        StoreError::BatchEmpty
        | StoreError::BatchTooLarge { .. }
        | StoreError::BatchMixedPartitions { .. } => "54000",
        StoreError::BatchDuplicateEntity { .. } => "21000",
        StoreError::InvalidContinuation(_) | StoreError::InvalidQuery(_) => "22023",
        StoreError::Corrupt(_) => "XX001",
        StoreError::Storage(_) => "58030",
        StoreError::Closed => "57P01",
        StoreError::Service(_) => "58000",
    }
}

fn model_state(e: &ModelError) -> &'static str {
    match e {
        ModelError::KeyTooLong { .. }
        | ModelError::TooManyProperties { .. }
        | ModelError::EntityTooLarge { .. } => "54000",
        ModelError::KeyForbiddenCharacter { .. }
        | ModelError::PropertyNameForbiddenCharacter { .. } => "22021",
        ModelError::PropertyNameLength { .. } | ModelError::InvalidTableName(_) => "42602",
        ModelError::ReservedPropertyName(_) => "42939",
    }
}

fn key_state(e: &KeyError) -> &'static str {
    match e {
        KeyError::Null { .. } => "23502",
        KeyError::ForbiddenCharacter { .. } => "22021",
        KeyError::Unsupported { .. } => "22023",
        KeyError::Malformed { .. } => "XX001",
    }
}

fn row_state(e: &RowError) -> &'static str {
    match e {
        RowError::Key(k) => key_state(k),
        RowError::NotNull { .. } => "23502",
        RowError::OutOfRange(_) => "22003",
        RowError::ReadOnly { .. } => "428C9",
        RowError::PropertyType { .. } => "42804",
    }
}

fn arrow_state(e: &ArrowError) -> &'static str {
    match e {
        ArrowError::CastError(m) if narrowing_cast(m).is_some() => "22003",
        ArrowError::CastError(m) => unread_text(m).map_or("22P02", |e| sqlstate(&e)),
        ArrowError::InvalidArgumentError(m) if numeric_overflow(m).is_some() => "22003",
        ArrowError::ParseError(m) if unread_interval(m).is_some() => "22007",
        ArrowError::ParseError(_) => "22P02",
        ArrowError::DivideByZero => "22012",
        ArrowError::ArithmeticOverflow(_) => "22003",
        ArrowError::ComputeError(m) if m.contains("Overflow") || m.contains("overflow") => "22003",
        _ => "22000",
    }
}

fn datafusion_state(e: &DataFusionError) -> &'static str {
    match e {
        DataFusionError::SQL(..) => "42601",
        DataFusionError::ArrowError(a, _) => arrow_state(a),
        DataFusionError::SchemaError(s, _) => {
            let m = s.to_string();
            if m.contains("No field named") || m.contains("not found") {
                "42703"
            } else if m.contains("ambiguous") || m.contains("Ambiguous") {
                "42702"
            } else if m.contains("duplicate") || m.contains("Duplicate") {
                "42701"
            } else {
                "42000"
            }
        }
        DataFusionError::Plan(m) => {
            if m.contains("table") && (m.contains("not found") || m.contains("does not exist")) {
                "42P01"
            } else if m.contains("Invalid function")
                || m.contains("does not exist")
                || m.contains("No function matches")
            {
                "42883"
            } else if m.contains("No field named") {
                "42703"
            } else if m.contains("must appear in the GROUP BY clause") {
                "42803"
            } else if m.contains("Cannot infer") || m.contains("type") {
                "42804"
            } else {
                "42000"
            }
        }
        DataFusionError::NotImplemented(_) => "0A000",
        DataFusionError::ResourcesExhausted(_) => "53200",
        DataFusionError::Execution(m)
            if m.to_lowercase().contains("divide by zero") || m.contains("Division by zero") =>
        {
            "22012"
        }
        DataFusionError::Execution(m) if m.contains("Cannot cast") || m.contains("cast") => "22P02",
        DataFusionError::Execution(m)
            if m.starts_with("Prepared statement") && m.ends_with("does not exist") =>
        {
            "26000"
        }
        DataFusionError::External(inner) => match inner.downcast_ref::<StoreError>() {
            Some(s) => store_state(s),
            None => match inner.downcast_ref::<SqlError>() {
                Some(q) => sqlstate(q),
                None => "XX000",
            },
        },
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            datafusion_state(inner)
        }
        DataFusionError::Shared(inner) => datafusion_state(inner),
        _ => "XX000",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_where_in_the_text_it_is() {
        let at = |sql: &str, e: SqlError| error_info_in(&e, sql).position;
        // The relation, by its first mention as a name (not in a string).
        assert_eq!(
            at(
                "select 'nope' from\n  nope",
                CatalogError::TableNotFound("nope".into()).into()
            ),
            Some("22".into())
        );
        // A qualified column, from its qualifier; a quoted name keeps its case.
        assert_eq!(
            at(
                "SELECT e.id, E.Nope FROM emp e",
                SqlError::value("42703", "column e.nope does not exist")
            ),
            Some("14".into())
        );
        assert_eq!(
            at(
                "SELECT \"Nope\", nope FROM t",
                SqlError::undefined_column("nope")
            ),
            Some("16".into())
        );
        // A syntax error, at the token the parser stopped on.
        assert_eq!(
            at(
                "SELECT 1;\nSELEC 2",
                SqlError::Syntax(
                    "sql parser error: Expected: an SQL statement, found: SELEC at Line: 2, Column: 1"
                        .into()
                )
            ),
            Some("11".into())
        );
        // Other errors have none, nor names ALTER and DROP look up.
        assert_eq!(
            at("SELECT 1/0", SqlError::value("22012", "division by zero")),
            None
        );
        assert_eq!(
            at(
                "alter table t rename column nope to z",
                SqlError::undefined_column("nope")
            ),
            None
        );
    }

    #[test]
    fn states() {
        let check = |e: SqlError, want: &str| assert_eq!(sqlstate(&e), want, "{e}");
        check(
            SqlError::UniqueViolation {
                table: "t".into(),
                key: "k".into(),
            },
            "23505",
        );
        check(
            SqlError::Store(StoreError::TableNotFound("t".into())),
            "42P01",
        );
        check(
            SqlError::Catalog(CatalogError::TableExists("t".into())),
            "42P07",
        );
        check(
            SqlError::Store(StoreError::Model(ModelError::EntityTooLarge {
                bytes: 2 << 20,
            })),
            "54000",
        );
        check(
            SqlError::DataFusion(DataFusionError::Plan("table 'x' not found".into())),
            "42P01",
        );
        check(
            SqlError::DataFusion(DataFusionError::ArrowError(
                Box::new(ArrowError::DivideByZero),
                None,
            )),
            "22012",
        );
        check(
            SqlError::Row(RowError::NotNull {
                table: "t".into(),
                column: "c".into(),
            }),
            "23502",
        );
    }

    #[test]
    fn a_number_too_large_for_its_numeric_is_an_overflow() {
        let arrow = ArrowError::InvalidArgumentError(
            "123456789.12 is too large to store in a Decimal128 of precision 10. Max is 99999999.99"
                .into(),
        );
        let e = SqlError::DataFusion(DataFusionError::ArrowError(Box::new(arrow), None));
        assert_eq!(sqlstate(&e), "22003");
        assert_eq!(
            message(&e),
            "numeric field overflow: a field with precision 10, scale 2 must round to an \
             absolute value less than 10^8"
        );
    }

    #[test]
    fn a_text_a_cast_cannot_read_is_named_as_postgresql_names_it() {
        let check = |arrow: &str, code: &str, words: &str| {
            let arrow = ArrowError::CastError(arrow.into());
            let e = SqlError::DataFusion(DataFusionError::Context(
                "Optimizer rule 'simplify_expressions' failed".into(),
                Box::new(DataFusionError::ArrowError(Box::new(arrow), None)),
            ));
            assert_eq!((sqlstate(&e), message(&e).as_str()), (code, words));
        };
        check(
            "Cannot cast string '12x' to value of Int32 type",
            "22P02",
            "invalid input syntax for type integer: \"12x\"",
        );
        check(
            "Cannot cast string '-99999' to value of Int16 type",
            "22003",
            "value \"-99999\" is out of range for type smallint",
        );
        check(
            "Cannot cast string 'x' to value of Decimal128(38, 10) type",
            "22P02",
            "invalid input syntax for type numeric: \"x\"",
        );
        check(
            "Cannot cast value 'maybe' to value of Boolean type",
            "22P02",
            "invalid input syntax for type boolean: \"maybe\"",
        );
        check(
            "Cannot cast string '1000000000000000000000000000000' to value of Decimal128(38, 10) type",
            "22003",
            "numeric field overflow: a field with precision 38, scale 10 must round to an \
             absolute value less than 10^28",
        );
        check(
            "Cannot cast string 'noon' to value of Time64(µs) type",
            "22007",
            "invalid input syntax for type time: \"noon\"",
        );
        let arrow =
            ArrowError::ParseError("Invalid input syntax for type interval: \"forever\"".into());
        let e = SqlError::DataFusion(DataFusionError::ArrowError(Box::new(arrow), None));
        assert_eq!(
            (sqlstate(&e), message(&e).as_str()),
            (
                "22007",
                "invalid input syntax for type interval: \"forever\""
            )
        );
        check(
            "Cannot cast to Interval(MonthDayNano). Overflowing on 9",
            "22P02",
            "Cannot cast to Interval(MonthDayNano). Overflowing on 9",
        );
    }

    #[test]
    fn a_unique_violation_names_its_key_in_the_detail() {
        let e = SqlError::UniqueViolation {
            table: "t".into(),
            key: "(id)=(5)".into(),
        };
        let info = error_info(&e);
        assert_eq!(
            info.message,
            "duplicate key value violates unique constraint \"t_pkey\""
        );
        assert_eq!(info.detail.as_deref(), Some("Key (id)=(5) already exists."));
        let other = error_info(&SqlError::Syntax("Key (x)".into()));
        assert_eq!(other.detail, None);
    }
}
