//! Key reads without a planning round trip.
//!
//! A prepared `SELECT <columns> FROM t WHERE <key comparisons> [ORDER BY
//! <row key> [DESC]] [LIMIT n]` is recognised once, when it is prepared, from
//! its optimized plan, when its comparisons (of key columns with parameters
//! or constants) fix the partition. Each execution then turns the parameters
//! into a point get or a range of one partition, read forwards or backwards
//! (the log tail): no DataFusion optimizer or physical planner per query.
//! Anything else (or a parameter that does not fit its column) takes the
//! general path.
//!
//! A query that compares key columns with literals (as clients of the simple
//! protocol send them) is read the same way: [`parameterize`] puts
//! parameters in place of its literals, the session prepares that text once,
//! and each run passes the literals as the parameters' values.

use std::borrow::Cow;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Column, ParamValues, ScalarValue};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, FetchType, LogicalPlan, Operator, Projection, SkipType,
};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::sql::sqlparser::ast;

use std::time::{Instant, SystemTime};

use super::convert::{RowDecoder, RowSink};
use super::diagnostics::queries::{QueryRecord, ScanRecord};
use super::diagnostics::Monitor;
use super::error::Result;
use super::pushdown::{access_path, index_equality, literal_value, AccessPath};
use super::txn::{written_entities, wrote_row, WrittenRows};
use crate::catalog::{Catalog, IndexDef, Keys, Row, SqlType, TableDef};
use crate::model::Value;
use crate::store::{EncodedRows, EntityRead, KeyRange, Query, MAX_PAGE_SIZE};

/// Where a key column's value comes from.
#[derive(Debug, Clone)]
enum Source {
    /// The parameter at this position (0 for `$1`).
    Param(usize),
    Constant(ScalarValue),
    /// A parameter plus or minus a constant (`$2 + 100`).
    Shifted {
        param: usize,
        op: Operator,
        by: ScalarValue,
    },
}

/// A key comparison: `column <op> source`.
#[derive(Debug, Clone)]
struct Condition {
    column: usize,
    op: Operator,
    source: Source,
}

/// A prepared read by key, or by the values of a secondary index.
#[derive(Debug)]
pub struct KeyPlan {
    table: Arc<TableDef>,
    conditions: Vec<Condition>,
    /// The index whose every column `conditions` fix, one equality each,
    /// when they are not on the key: its entries name the rows.
    index: Option<IndexDef>,
    /// Every key column is compared for equality: one point get.
    point: bool,
    /// The rows read must be checked against the comparisons again (all but
    /// a point get by exactly one equality per key column, whose key is exact).
    recheck: bool,
    /// Rows in reverse key order (`ORDER BY <row key> DESC`).
    reverse: bool,
    /// Most rows returned.
    fetch: Option<usize>,
    /// Decodes the output columns from the rows read.
    decoder: RowDecoder,
    /// Properties to decode.
    projection: Option<Vec<String>>,
    schema: SchemaRef,
}

/// Rows a read without a limit may hold before the general path, which
/// streams them, takes over.
const MAX_UNLIMITED_ROWS: usize = 1000;

fn column_index(def: &TableDef, expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Column(c) => def.column_index(&c.name),
        Expr::Alias(a) => column_index(def, &a.expr),
        _ => None,
    }
}

/// The key column a comparison compares: the column itself, or a
/// smallint or integer column widened to bigint (as the planner does to
/// compare it with `$2 + 100`), which keeps its order.
fn compared_column(def: &TableDef, expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Cast(Cast { expr, field }) if field.data_type() == &DataType::Int64 => {
            let column = column_index(def, expr)?;
            matches!(def.columns[column].ty, SqlType::Int2 | SqlType::Int4).then_some(column)
        }
        e => column_index(def, e),
    }
}

/// The table column an expression over the output of `below` (projections,
/// the top one first, above the scan) names.
fn table_column(def: &TableDef, expr: &Expr, below: &[&Projection]) -> Option<usize> {
    match below.split_first() {
        None => column_index(def, expr),
        Some((projection, rest)) => {
            let column = match expr {
                Expr::Column(c) => c,
                Expr::Alias(a) => match a.expr.as_ref() {
                    Expr::Column(c) => c,
                    _ => return None,
                },
                _ => return None,
            };
            let j = projection.schema.index_of_column(column).ok()?;
            table_column(def, &projection.expr[j], rest)
        }
    }
}

fn source(expr: &Expr) -> Option<Source> {
    match expr {
        Expr::Placeholder(_) => Some(Source::Param(parameter(expr, None)?)),
        Expr::Literal(v, _) => Some(Source::Constant(v.clone())),
        e => {
            let (op, left, right) = super::arithmetic::operation(e)?;
            let (param, by) = match (op, left, right) {
                (Operator::Plus | Operator::Minus, param, Expr::Literal(by, _)) => (param, by),
                (Operator::Plus, Expr::Literal(by, _), param) => (param, by),
                _ => return None,
            };
            Some(Source::Shifted {
                param: parameter(param, Some(&by.data_type()))?,
                op,
                by: by.clone(),
            })
        }
    }
}

/// The position of a parameter (0 for `$1`); with `shifted_to`, also of a
/// parameter cast to that type, as a shifted bound casts its value.
fn parameter(expr: &Expr, shifted_to: Option<&DataType>) -> Option<usize> {
    match expr {
        Expr::Placeholder(p) => {
            p.id.strip_prefix('$')?
                .parse::<usize>()
                .ok()?
                .checked_sub(1)
        }
        Expr::Cast(Cast { expr, field }) if Some(field.data_type()) == shifted_to => {
            parameter(expr, None)
        }
        _ => None,
    }
}

fn flip(op: Operator) -> Option<Operator> {
    Some(match op {
        Operator::Eq => Operator::Eq,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        _ => return None,
    })
}

/// `column <op> source` or `source <op> column`.
fn condition(def: &TableDef, filter: &Expr) -> Option<Condition> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = filter else {
        return None;
    };
    let (column, op, source) = match (compared_column(def, left), source(right)) {
        (Some(c), Some(s)) => (c, *op, s),
        _ => (compared_column(def, right)?, flip(*op)?, source(left)?),
    };
    // Only the comparisons a key range can hold.
    flip(op)?;
    Some(Condition { column, op, source })
}

/// The index whose columns `conditions` fix, each by one equality and
/// nothing else (not one being built, nor an intra-partition index, whose
/// entries are looked up with the partition key).
fn equality_index<'a>(def: &'a TableDef, conditions: &[Condition]) -> Option<&'a IndexDef> {
    if conditions.iter().any(|c| c.op != Operator::Eq) {
        return None;
    }
    let mut columns: Vec<usize> = conditions.iter().map(|c| c.column).collect();
    columns.sort_unstable();
    if columns.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    def.indexes
        .iter()
        .filter(|i| !i.building && !i.intra_partition)
        .find(|index| {
            let mut of_index: Vec<usize> = index
                .columns
                .iter()
                .filter_map(|name| def.column_index(name))
                .collect();
            of_index.sort_unstable();
            of_index == columns
        })
}

/// The parts of a plan `Limit? -> Sort? -> Filter? -> TableScan`, with
/// column-only projections anywhere above the filter.
#[derive(Default)]
struct Shape<'a> {
    fetch: Option<usize>,
    /// The sort's columns and directions (ascending: true).
    sort: Vec<(&'a Column, bool)>,
    /// Column-only projections, the top one first.
    projections: Vec<&'a Projection>,
    /// How many of them are above the sort.
    projections_over_sort: usize,
    filter: Option<&'a Expr>,
}

fn min_fetch(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether the key range the comparisons make holds exactly the rows that
/// meet them, so the rows read need no second check: each key column has
/// one equality, except that the row key column after those may instead
/// have at most one lower and one upper bound, when its values all have a
/// key component of one width (integers), and no column after it is compared.
fn exact_range(
    def: &TableDef,
    partition: &[usize],
    row: &[usize],
    conditions: &[Condition],
) -> bool {
    let on = |column: usize| conditions.iter().filter(move |c| c.column == column);
    let one_equality = |column: usize| {
        let mut cs = on(column);
        matches!((cs.next(), cs.next()), (Some(c), None) if c.op == Operator::Eq)
    };
    if !partition.iter().all(|&c| one_equality(c)) {
        return false;
    }
    let fixed = row.iter().take_while(|&&c| one_equality(c)).count();
    let Some((&bounded, after)) = row[fixed..].split_first() else {
        return true;
    };
    let count = |ops: &[Operator]| on(bounded).filter(|c| ops.contains(&c.op)).count();
    let lower = count(&[Operator::Gt, Operator::GtEq]);
    let upper = count(&[Operator::Lt, Operator::LtEq]);
    lower <= 1
        && upper <= 1
        && on(bounded).count() == lower + upper
        && (lower + upper == 0 || matches!(def.columns[bounded].ty, SqlType::Int4 | SqlType::Int8))
        && after.iter().all(|&c| on(c).next().is_none())
}

/// Puts parameters (`$1`, `$2`, ...) in place of the literals that a plain
/// SELECT of one table compares columns with in its WHERE clause (in its
/// top-level conjunction), and returns their values in order; `None` when
/// the query is not of that shape or has no such literal. Only literals
/// whose value is the one the general path would plan (see
/// [`literal_scalar`]) are replaced.
pub fn parameterize(query: &mut ast::Query) -> Option<Vec<ScalarValue>> {
    if query.with.is_some() || query.fetch.is_some() || !query.locks.is_empty() {
        return None;
    }
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let plain = matches!(select.from.as_slice(), [from] if from.joins.is_empty()
            && matches!(from.relation, ast::TableFactor::Table { args: None, .. }))
        && select.distinct.is_none()
        && select.having.is_none()
        && super::rewrite::ungrouped(select);
    if !plain {
        return None;
    }
    let mut values = Vec::new();
    parameterize_conjunction(select.selection.as_mut()?, &mut values);
    (!values.is_empty()).then_some(values)
}

fn parameterize_conjunction(expr: &mut ast::Expr, values: &mut Vec<ScalarValue>) {
    use ast::BinaryOperator as Op;
    let is_column = |e: &ast::Expr| {
        matches!(
            e,
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
        )
    };
    match expr {
        ast::Expr::Nested(e) => parameterize_conjunction(e, values),
        ast::Expr::BinaryOp {
            left,
            op: Op::And,
            right,
        } => {
            parameterize_conjunction(left, values);
            parameterize_conjunction(right, values);
        }
        ast::Expr::BinaryOp {
            left,
            op: Op::Eq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq,
            right,
        } => {
            if is_column(left) {
                parameterize_literal(right, values);
            } else if is_column(right) {
                parameterize_literal(left, values);
            }
        }
        ast::Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } if is_column(expr) => {
            parameterize_literal(low, values);
            parameterize_literal(high, values);
        }
        _ => {}
    }
}

fn parameterize_literal(expr: &mut ast::Expr, values: &mut Vec<ScalarValue>) {
    if let Some(value) = literal_scalar(expr) {
        values.push(value);
        let placeholder = ast::Value::Placeholder(format!("${}", values.len()));
        *expr = ast::Expr::Value(placeholder.with_empty_span());
    }
}

/// The value of an integer literal as it is planned: an `integer` if it
/// holds it, else a `bigint` (see [`super::arithmetic::integer_literals`]).
fn integer_literal(text: &str) -> Option<ScalarValue> {
    let v = text.parse::<i64>().ok()?;
    Some(match i32::try_from(v) {
        Ok(v) => ScalarValue::Int32(Some(v)),
        Err(_) => ScalarValue::Int64(Some(v)),
    })
}

/// A query's text with its unsigned integer and string literals taken out,
/// and their values in order: texts of one shape differ only in those
/// literals, so they parse alike but for the literals' values. `None` for
/// a text this reading does not follow: placeholders or dollar quoting
/// (`$`), backslashes, block comments, prefixed strings (`E'...'`,
/// `U&'...'`), numbers with a fraction or an exponent.
///
/// Each literal is marked in the shape with its kind (`$i`, `$s`); the
/// marks cannot be confused with the text, which holds no `$`.
pub fn literal_shape(sql: &str) -> Option<(String, Vec<ScalarValue>)> {
    if sql.contains(['$', '\\']) {
        return None;
    }
    let bytes = sql.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    let mut shape = String::with_capacity(sql.len());
    let mut values = Vec::new();
    // Text before `copied` is in the shape.
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'*') => return None,
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
            }
            b'"' => {
                i += 1;
                while *bytes.get(i)? != b'"' || bytes.get(i + 1) == Some(&b'"') {
                    i += if bytes[i] == b'"' { 2 } else { 1 };
                }
                i += 1;
            }
            b'\'' => {
                if i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == b'&') {
                    return None;
                }
                let start = i;
                let mut value = String::new();
                i += 1;
                loop {
                    let end = i + sql[i..].find('\'')?;
                    value.push_str(&sql[i..end]);
                    if bytes.get(end + 1) == Some(&b'\'') {
                        value.push('\'');
                        i = end + 2;
                    } else {
                        i = end + 1;
                        break;
                    }
                }
                shape.push_str(&sql[copied..start]);
                shape.push_str("$s");
                copied = i;
                values.push(ScalarValue::Utf8(Some(value)));
            }
            b'0'..=b'9' if i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == b'.') => {
                let start = i;
                while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                if bytes.get(i).is_some_and(|&b| word(b) || b == b'.') {
                    return None;
                }
                values.push(integer_literal(&sql[start..i])?);
                shape.push_str(&sql[copied..start]);
                shape.push_str("$i");
                copied = i;
            }
            _ => i += 1,
        }
    }
    shape.push_str(&sql[copied..]);
    Some((shape, values))
}

/// Where `needles` are in `haystack` as a subsequence (their indexes in
/// it), if there is exactly one way they are: the leftmost and the
/// rightmost placements then agree, and every placement lies between
/// them.
pub fn only_embedding<T: PartialEq>(needles: &[T], haystack: &[T]) -> Option<Vec<usize>> {
    let mut leftmost = Vec::with_capacity(needles.len());
    let mut from = 0;
    for needle in needles {
        let i = from + haystack[from..].iter().position(|h| h == needle)?;
        leftmost.push(i);
        from = i + 1;
    }
    let mut to = haystack.len();
    for (k, needle) in needles.iter().enumerate().rev() {
        let i = haystack[..to].iter().rposition(|h| h == needle)?;
        if i != leftmost[k] {
            return None;
        }
        to = i;
    }
    Some(leftmost)
}

/// A literal's value as it is planned: an integer literal is an `Int32`
/// or an `Int64`, a string `Utf8`, `true` and `false` `Boolean`.
pub(super) fn literal_scalar(expr: &ast::Expr) -> Option<ScalarValue> {
    match expr {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, false) => integer_literal(n),
            ast::Value::SingleQuotedString(s) => Some(ScalarValue::Utf8(Some(s.clone()))),
            ast::Value::Boolean(b) => Some(ScalarValue::Boolean(Some(*b))),
            _ => None,
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, false) => integer_literal(&format!("-{n}")),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

impl KeyPlan {
    /// Recognises a read by key in an optimized plan. `key_ordered`: the
    /// store reads ranges in key order (the Cosmos DB Table API does not).
    pub fn detect(plan: &LogicalPlan, catalog: &Catalog, key_ordered: bool) -> Option<KeyPlan> {
        let mut shape = Shape::default();
        let mut node = plan;
        // Each step may only be followed by the steps below it.
        let mut stage = 0;
        let scan = loop {
            match node {
                LogicalPlan::Limit(limit) if stage < 1 => {
                    let (SkipType::Literal(0), FetchType::Literal(fetch)) =
                        (limit.get_skip_type().ok()?, limit.get_fetch_type().ok()?)
                    else {
                        return None;
                    };
                    shape.fetch = fetch;
                    stage = 1;
                    node = &limit.input;
                }
                LogicalPlan::Sort(sort) if stage < 2 => {
                    for s in &sort.expr {
                        let Expr::Column(column) = &s.expr else {
                            return None;
                        };
                        shape.sort.push((column, s.asc));
                    }
                    shape.projections_over_sort = shape.projections.len();
                    shape.fetch = min_fetch(shape.fetch, sort.fetch);
                    stage = 2;
                    node = &sort.input;
                }
                LogicalPlan::Projection(p) if stage < 3 => {
                    shape.projections.push(p);
                    node = &p.input;
                }
                LogicalPlan::Filter(f) if stage < 3 => {
                    shape.filter = Some(&f.predicate);
                    stage = 3;
                    node = &f.input;
                }
                LogicalPlan::TableScan(scan) => break scan,
                _ => return None,
            }
        };
        let def = catalog.get(scan.table_name.table())?;
        // A limit inside the scan comes after its filters but before any sort.
        if scan.fetch.is_some() && !shape.sort.is_empty() {
            return None;
        }
        let fetch = min_fetch(shape.fetch, scan.fetch);

        let conditions: Vec<Condition> = scan
            .filters
            .iter()
            .chain(shape.filter)
            .flat_map(split_conjunction)
            .map(|f| condition(&def, f))
            .collect::<Option<_>>()?;
        let equal = |c: &usize| {
            conditions
                .iter()
                .any(|k| k.column == *c && k.op == Operator::Eq)
        };
        let by_key = match &def.keys {
            Keys::Columns { partition, row }
                if partition.iter().all(equal)
                    && conditions
                        .iter()
                        .all(|c| partition.contains(&c.column) || row.contains(&c.column)) =>
            {
                Some((partition, row))
            }
            _ => None,
        };
        let index = match by_key {
            Some(_) => None,
            // Rows read through an index come in its order, not the key's.
            None if shape.sort.is_empty() => Some(equality_index(&def, &conditions)?.clone()),
            None => return None,
        };
        let empty = Vec::new();
        let (partition, row) = by_key.unwrap_or((&empty, &empty));
        let point = index.is_none() && row.iter().all(equal);
        let recheck = index.is_none() && !exact_range(&def, partition, row, &conditions);

        // The sort must be a prefix of the row key, all one way, and the
        // store must read in key order.
        let reverse = shape.sort.first().is_some_and(|&(_, asc)| !asc);
        if !shape.sort.is_empty() {
            let prefix = shape.sort.len() <= row.len()
                && shape.sort.iter().zip(row).all(|(&(column, asc), &r)| {
                    let below = &shape.projections[shape.projections_over_sort..];
                    let column = Expr::Column(column.clone());
                    table_column(&def, &column, below) == Some(r) && asc != reverse
                });
            if !prefix || !(key_ordered || point) {
                return None;
            }
        }

        let scanned: Vec<usize> = match &scan.projection {
            Some(p) => p.clone(),
            None => (0..def.columns.len()).collect(),
        };
        let outputs: Vec<usize> = match shape.projections.split_first() {
            Some((top, below)) => top
                .expr
                .iter()
                .map(|e| table_column(&def, e, below))
                .collect::<Option<_>>()?,
            None => scanned,
        };
        if outputs.iter().any(|&i| i >= def.columns.len()) {
            return None;
        }
        let projection = def.store_projection(outputs.iter().copied());
        let decoder = RowDecoder::new(&def, &outputs);
        let schema = Arc::new(plan.schema().as_arrow().clone());
        Some(KeyPlan {
            table: def,
            conditions,
            index,
            point,
            recheck,
            reverse,
            fetch,
            decoder,
            projection,
            schema,
        })
    }

    /// Runs the query, or returns `None` when the general path must (a
    /// parameter that does not convert, a table changed since preparing, a
    /// read the general path would stream). `written`: the rows the open
    /// transaction block wrote to the table, which its indexes hold only
    /// from the commit.
    pub async fn execute(
        self: &Arc<Self>,
        current: Option<Arc<TableDef>>,
        view: Arc<dyn EntityRead>,
        written: Option<WrittenRows>,
        params: &ParamValues,
        monitor: &Monitor,
        text: &Arc<str>,
    ) -> Result<Option<StoredRows>> {
        if !self.is_current(current.as_ref()) {
            return Ok(None);
        }
        let def = &self.table;
        let ParamValues::List(values) = params else {
            return Ok(None);
        };
        // Each comparison's value, as the column holds it and as a literal.
        let mut bounds: Vec<(&Condition, Value, ScalarValue)> = Vec::new();
        for condition in &self.conditions {
            let scalar = match &condition.source {
                Source::Param(i) => match values.get(*i) {
                    Some(v) => Cow::Borrowed(&v.value),
                    None => return Ok(None),
                },
                Source::Constant(v) => Cow::Borrowed(v),
                Source::Shifted { param, op, by } => {
                    let Some(v) = values.get(*param) else {
                        return Ok(None);
                    };
                    let shifted = v.value.cast_to(&by.data_type()).and_then(|v| match op {
                        Operator::Plus => v.add_checked(by),
                        _ => v.sub_checked(by),
                    });
                    // An overflow, or a value of another kind: the general
                    // path answers.
                    match shifted {
                        Ok(shifted) => Cow::Owned(shifted),
                        Err(_) => return Ok(None),
                    }
                }
            };
            // A comparison with NULL holds for no row.
            if scalar.is_null() {
                return Ok(Some(self.rows(EncodedRows::new())));
            }
            let column = &def.columns[condition.column];
            // A value compared with an enum column must be one of its
            // type's labels (22P02), as it is on the general path.
            if let Some(ty) = &column.enum_type {
                if let Some(Some(text)) = scalar.try_as_str() {
                    super::enums::check_label(ty, text)?;
                }
            }
            match literal_value(column.ty, &scalar) {
                Some(v) => bounds.push((condition, v, scalar.into_owned())),
                None => return Ok(None),
            }
        }
        let started = (SystemTime::now(), Instant::now());
        let mut rows = EncodedRows::new();
        let (access, read) = if let Some(index) = &self.index {
            let values: Vec<(usize, Value)> = bounds
                .iter()
                .map(|(condition, value, _)| (condition.column, value.clone()))
                .collect();
            let ranges = index_equality(def, index, &values);
            self.read_through_index(&*view, index, &ranges, written.as_ref(), &mut rows)
                .await?;
            if self.fetch.is_none() && rows.len() > MAX_UNLIMITED_ROWS {
                return Ok(None);
            }
            let index = index.clone();
            (AccessPath::Index { index, ranges }, rows.len())
        } else if self.point {
            let mut row: Row = vec![None; def.columns.len()];
            for (condition, value, _) in &bounds {
                if condition.op == Operator::Eq {
                    row[condition.column] = Some(value.clone());
                }
            }
            // A value no key can hold matches no row.
            let Ok(key) = def.entity_key(&row) else {
                return Ok(Some(self.rows(rows)));
            };
            if self.recheck {
                let mut read = EncodedRows::new();
                view.get_row(&def.name, &key, &mut read).await?;
                self.keep_matching(&bounds, &read, &mut rows, 1)?;
            } else {
                view.get_row(&def.name, &key, &mut rows).await?;
            }
            (AccessPath::Points(vec![key]), rows.len())
        } else {
            let filters: Vec<Expr> = bounds
                .iter()
                .map(|(c, _, scalar)| {
                    Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(Expr::Column(Column::new_unqualified(
                            &def.columns[c.column].name,
                        ))),
                        c.op,
                        Box::new(Expr::Literal(scalar.clone(), None)),
                    ))
                })
                .collect();
            let access = access_path(def, &filters);
            let AccessPath::Ranges(ranges) = &access else {
                return Ok(None);
            };
            let [range @ KeyRange::Rows { .. }] = ranges.as_slice() else {
                return Ok(None);
            };
            let limit = self.fetch.unwrap_or(MAX_UNLIMITED_ROWS + 1);
            let mut query = Query::new(range.clone());
            query.reverse = self.reverse;
            query.projection = self.projection.clone();
            let mut page = EncodedRows::new();
            let mut read = 0;
            let mut continuation = None;
            loop {
                query.page_size = (limit - rows.len()).clamp(1, MAX_PAGE_SIZE);
                // Rows whose keys need no second look are read into place.
                let into = if self.recheck { &mut page } else { &mut rows };
                let before = into.len();
                continuation = view
                    .query_rows(&def.name, &query, continuation.as_ref(), into)
                    .await?;
                read += into.len() - before;
                if self.recheck {
                    self.keep_matching(&bounds, &page, &mut rows, limit)?;
                    page.clear();
                }
                if rows.len() >= limit || continuation.is_none() {
                    break;
                }
            }
            if self.fetch.is_none() && rows.len() > MAX_UNLIMITED_ROWS {
                return Ok(None);
            }
            (access, read)
        };
        let partition = match &access {
            AccessPath::Points(keys) => keys[0].partition_key.as_str(),
            AccessPath::Ranges(ranges) => match &ranges[0] {
                KeyRange::Rows { partition_key, .. } => partition_key.as_str(),
                KeyRange::Partitions { .. } => "",
            },
            _ => "",
        };
        let returned = rows.len() as u64;
        monitor
            .traffic
            .record_reads(&def.name, [(partition, read as u64)]);
        monitor.record_statement(QueryRecord {
            id: 0,
            started: started.0,
            text: text.clone(),
            elapsed: started.1.elapsed(),
            rows: returned,
            scans: vec![ScanRecord {
                table: def.name.clone(),
                access,
                key_lookups: false,
                entities_read: read as u64,
                rows_returned: returned,
                filter_columns: Vec::new(),
                reverse: self.reverse,
                joined: false,
                aggregated: false,
            }],
        });
        Ok(Some(self.rows(rows)))
    }

    /// Reads into `rows` the rows the entries of `ranges` of an index name,
    /// up to the plan's limit (one past the most a read without a limit
    /// keeps). The rows a transaction block wrote (`written`) are read from
    /// its writes: their entries are skipped, and those whose entry the
    /// ranges name are taken.
    async fn read_through_index(
        &self,
        view: &dyn EntityRead,
        index: &IndexDef,
        ranges: &[KeyRange],
        written: Option<&WrittenRows>,
        rows: &mut EncodedRows,
    ) -> Result<()> {
        let limit = self.fetch.unwrap_or(MAX_UNLIMITED_ROWS + 1);
        if let Some(written) = written {
            let named = |partition_key: &str| {
                ranges.iter().any(
                    |r| matches!(r, KeyRange::Rows { partition_key: p, .. } if p == partition_key),
                )
            };
            for entity in written_entities(written) {
                if rows.len() >= limit {
                    return Ok(());
                }
                let entry = index.entry(&self.table, &entity)?;
                if entry.is_some_and(|e| named(&e.key.partition_key)) {
                    rows.push_entities(std::slice::from_ref(&entity));
                }
            }
        }
        let store_table = index.store_table();
        let mut entries = EncodedRows::new();
        for range in ranges {
            if let Some(key) = index.only_entry(range) {
                entries.clear();
                view.get_row(&store_table, &key, &mut entries).await?;
                if self
                    .read_entries(view, &entries, written, rows, limit)
                    .await?
                {
                    return Ok(());
                }
                continue;
            }
            let mut query = Query::new(range.clone()).project(vec![
                crate::catalog::BASE_PARTITION_KEY.to_owned(),
                crate::catalog::BASE_ROW_KEY.to_owned(),
            ]);
            let mut continuation = None;
            loop {
                query.page_size = (limit - rows.len()).clamp(1, MAX_PAGE_SIZE);
                entries.clear();
                continuation = view
                    .query_rows(&store_table, &query, continuation.as_ref(), &mut entries)
                    .await?;
                if self
                    .read_entries(view, &entries, written, rows, limit)
                    .await?
                {
                    return Ok(());
                }
                if continuation.is_none() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Reads into `rows` the rows index `entries` point at, but those a
    /// transaction block wrote; whether `limit` rows are read.
    async fn read_entries(
        &self,
        view: &dyn EntityRead,
        entries: &EncodedRows,
        written: Option<&WrittenRows>,
        rows: &mut EncodedRows,
        limit: usize,
    ) -> Result<bool> {
        for entry in entries.iter() {
            let base = crate::catalog::base_key_in_record(entry.record)
                .map_err(crate::store::StoreError::from)?;
            let Some(base) = base else { continue };
            if written.is_some_and(|w| wrote_row(w, &base)) {
                continue;
            }
            view.get_row(&self.table.name, &base, rows).await?;
            if rows.len() >= limit {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Appends to `kept`, up to `limit` rows, the rows read whose key
    /// columns meet every comparison (for reads whose bounds could not be
    /// encoded exactly).
    fn keep_matching(
        &self,
        bounds: &[(&Condition, Value, ScalarValue)],
        read: &EncodedRows,
        kept: &mut EncodedRows,
        limit: usize,
    ) -> Result<()> {
        for row in read.iter() {
            if kept.len() >= limit {
                break;
            }
            if !self.holds(bounds, row.partition_key, row.row_key)? {
                continue;
            }
            kept.push(
                (row.partition_key, row.row_key),
                row.etag,
                row.timestamp,
                row.record,
            );
        }
        Ok(())
    }

    /// Whether a row's key columns meet every comparison.
    fn holds(
        &self,
        bounds: &[(&Condition, Value, ScalarValue)],
        partition_key: &str,
        row_key: &str,
    ) -> Result<bool> {
        let parts = self.table.key_parts_of(partition_key, row_key)?;
        Ok(bounds.iter().all(|(condition, value, _)| {
            parts
                .value(condition.column)
                .and_then(|column| column.compare(value))
                .is_some_and(|order| match condition.op {
                    Operator::Eq => order.is_eq(),
                    Operator::Lt => order.is_lt(),
                    Operator::LtEq => order.is_le(),
                    Operator::Gt => order.is_gt(),
                    Operator::GtEq => order.is_ge(),
                    _ => false,
                })
        }))
    }

    /// Whether the plan was made for the table's definition as it is now.
    pub fn is_current(&self, current: Option<&Arc<TableDef>>) -> bool {
        current.is_some_and(|current| Arc::ptr_eq(current, &self.table))
    }

    /// The plan with its result columns under PostgreSQL's names, where
    /// they differ from DataFusion's (renamed once, when prepared).
    pub fn with_names(mut self, names: Option<&[Option<String>]>) -> KeyPlan {
        if let Some(names) = names {
            self.schema = super::names::rename(&self.schema, names);
        }
        self
    }

    pub fn table_name(&self) -> &str {
        &self.table.name
    }

    fn rows(self: &Arc<Self>, rows: EncodedRows) -> StoredRows {
        StoredRows {
            schema: self.schema.clone(),
            plan: self.clone(),
            rows,
        }
    }
}

/// Rows read by key, as the store holds them: the wire layer encodes them
/// without a record batch between (see [`RowSink`]); anything else decodes
/// them into one.
pub struct StoredRows {
    /// The plan's result columns.
    schema: SchemaRef,
    plan: Arc<KeyPlan>,
    rows: EncodedRows,
}

impl StoredRows {
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Passes each row's values to `sink`, column by column.
    pub fn decode_into<S: RowSink>(&self, sink: &mut S) -> std::result::Result<(), S::Error> {
        let table = &self.plan.table;
        self.plan.decoder.decode_into(table, &self.rows, sink)
    }

    /// The rows as a stream of one record batch, for readers of batches.
    pub fn into_stream(self) -> Result<SendableRecordBatchStream> {
        let table = &self.plan.table;
        let batch = self
            .plan
            .decoder
            .decode(table, self.schema.clone(), &self.rows)?;
        Ok(Box::pin(MemoryStream::try_new(
            vec![batch],
            self.schema,
            None,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text a query becomes with parameters for its literals, and their values.
    fn parameterized(sql: &str) -> Option<(String, Vec<ScalarValue>)> {
        use datafusion::sql::sqlparser::{dialect::PostgreSqlDialect, parser::Parser};
        let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap();
        let ast::Statement::Query(query) = &mut statements[0] else {
            panic!("not a query: {sql}");
        };
        let values = parameterize(query)?;
        Some((query.to_string(), values))
    }

    #[test]
    fn a_shape_is_the_text_without_its_literals() {
        let int = |v| ScalarValue::Int32(Some(v));
        let text = |v: &str| ScalarValue::Utf8(Some(v.into()));
        assert_eq!(
            literal_shape(
                "SELECT \"a1\", b2 FROM t3 WHERE k = 42 AND r >= 'it''s' -- 7 'x'\n LIMIT 10"
            ),
            Some((
                "SELECT \"a1\", b2 FROM t3 WHERE k = $i AND r >= $s -- 7 'x'\n LIMIT $i".into(),
                vec![int(42), text("it's"), int(10)]
            ))
        );
        assert_eq!(
            literal_shape("select * from \"we\"\"ird 1\" where k=-5 and r='é'"),
            Some((
                "select * from \"we\"\"ird 1\" where k=-$i and r=$s".into(),
                vec![int(5), text("é")]
            ))
        );
        // Texts two readings could take apart differently are not read.
        for sql in [
            "SELECT a FROM t WHERE k = $1",
            "SELECT a FROM t WHERE k = $$x$$",
            "SELECT a FROM t WHERE k = E'a\\'' AND r = 'b'",
            "SELECT a FROM t WHERE k = 'a\\'",
            "SELECT a FROM t WHERE k = U&'x'",
            "SELECT a FROM t /* 5 */ WHERE k = 1",
            "SELECT a FROM t WHERE k = 1.5",
            "SELECT a FROM t WHERE k = 1e5",
            "SELECT a FROM t WHERE k = 99999999999999999999",
            "SELECT a FROM t WHERE k = 'open",
            "SELECT a FROM \"open",
        ] {
            assert_eq!(literal_shape(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_subsequence_is_placed_when_only_one_placement_exists() {
        assert_eq!(only_embedding(&[5, 7], &[5, 10, 7]), Some(vec![0, 2]));
        assert_eq!(only_embedding(&[5], &[5, 10]), Some(vec![0]));
        assert_eq!(only_embedding::<i32>(&[], &[10]), Some(vec![]));
        assert_eq!(only_embedding(&[10], &[10, 10]), None);
        assert_eq!(only_embedding(&[5, 10], &[5, 10, 10]), None);
        assert_eq!(only_embedding(&[5, 10], &[10, 5]), None);
        assert_eq!(only_embedding(&[-7], &[7]), None);
    }

    #[test]
    fn literals_compared_with_columns_become_parameters() {
        let int = |v| ScalarValue::Int32(Some(v));
        let text = |v: &str| ScalarValue::Utf8(Some(v.into()));
        assert_eq!(
            parameterized("SELECT a FROM t WHERE k = 5 AND 'x''y' <= r AND (r < -7) LIMIT 3"),
            Some((
                "SELECT a FROM t WHERE k = $1 AND $2 <= r AND (r < $3) LIMIT 3".into(),
                vec![int(5), text("x'y"), int(-7)]
            ))
        );
        assert_eq!(
            parameterized("SELECT * FROM t WHERE t.k = true AND r BETWEEN 1 AND 2"),
            Some((
                "SELECT * FROM t WHERE t.k = $1 AND r BETWEEN $2 AND $3".into(),
                vec![ScalarValue::Boolean(Some(true)), int(1), int(2)]
            ))
        );
        // Literals the planner would type otherwise stay; so do literals
        // outside the WHERE clause's conjunction of comparisons.
        assert_eq!(
            parameterized(
                "SELECT 1, a FROM t WHERE k = 2.5 AND r = 9223372036854775808 AND k = 4 OR r = 1"
            ),
            None
        );
        assert_eq!(
            parameterized(
                "SELECT 1, a FROM t WHERE k = 2.5 AND r = 99999999999999999999 AND k = upper('x')"
            ),
            None
        );
        assert_eq!(
            parameterized("SELECT a FROM t WHERE k = 2.5 AND r = 4"),
            Some((
                "SELECT a FROM t WHERE k = 2.5 AND r = $1".into(),
                vec![int(4)]
            ))
        );
        // Only a plain SELECT of one table.
        for sql in [
            "SELECT a FROM t JOIN u ON t.k = u.k WHERE t.k = 1",
            "SELECT a FROM t, u WHERE t.k = 1",
            "SELECT DISTINCT a FROM t WHERE k = 1",
            "SELECT a, count(*) FROM t WHERE k = 1 GROUP BY a",
            "WITH w AS (SELECT 1) SELECT a FROM t WHERE k = 1",
            "SELECT a FROM t WHERE k = 1 UNION SELECT a FROM u WHERE k = 1",
            "SELECT a FROM t WHERE k = 1 FOR UPDATE",
            "SELECT a FROM t",
        ] {
            assert_eq!(parameterized(sql), None, "{sql}");
        }
    }
}
