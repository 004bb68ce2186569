//! Which store calls answer a scan's filters: the pushdown table of the design.
//!
//! | filters on key columns | access path |
//! |---|---|
//! | every key column `=` (or `IN`, or an OR of such points) | point gets |
//! | partition columns `=`/`IN`, a prefix of row columns `=`, then a range or `LIKE 'p%'` | one RowKey range per partition |
//! | partition columns `=`/`IN` | partition scans |
//! | a range on the first partition column | a PartitionKey range |
//! | anything else | table scan |
//!
//! The path only narrows what is read: the scan evaluates every filter on the
//! rows it reads, so a path may read a superset (for instance an exclusive
//! bound on a column that is not the last of its key is read inclusively).
//! [`access_path`] is the one function that decides; scans and `EXPLAIN`
//! both use what it returns.

use std::fmt;
use std::ops::Bound;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{Between, InList, Like};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use super::types::parse_uuid;
use crate::catalog::{
    encode_component, encode_index_component, join_components, IndexDef, Keys, SqlType, TableDef,
};
use crate::model::{Date, DateTime, Decimal, EntityKey, Value};
use crate::store::KeyRange;

/// Most point gets or ranges one scan turns into before it gives up and scans.
pub const MAX_KEYS: usize = 10_000;

/// How a scan reads the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessPath {
    /// Point gets of these keys, in key order.
    Points(Vec<EntityKey>),
    /// These key ranges, in key order.
    Ranges(Vec<KeyRange>),
    /// Every entity of the table.
    Table,
    /// The rows an index holds under these values (its entities'
    /// PartitionKeys), by point gets of the keys it gives.
    Index {
        index: IndexDef,
        ranges: Vec<KeyRange>,
    },
}

impl AccessPath {
    /// Whether the path reads across partitions (the whole table, or a
    /// range of PartitionKeys) rather than partitions it names.
    pub fn across_partitions(&self) -> bool {
        match self {
            AccessPath::Table => true,
            AccessPath::Ranges(ranges) => ranges
                .iter()
                .any(|r| matches!(r, KeyRange::Partitions { .. })),
            AccessPath::Points(_) | AccessPath::Index { .. } => false,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            AccessPath::Points(p) if p.len() == 1 => "point",
            AccessPath::Points(_) => "multi-point",
            AccessPath::Ranges(r)
                if r.iter().all(|r| {
                    matches!(
                        r,
                        KeyRange::Rows {
                            from: Bound::Unbounded,
                            to: Bound::Unbounded,
                            ..
                        }
                    )
                }) =>
            {
                "partition"
            }
            AccessPath::Ranges(r) if r.iter().all(|r| matches!(r, KeyRange::Rows { .. })) => {
                "range"
            }
            AccessPath::Ranges(_) => "partition-range",
            AccessPath::Table => "table",
            AccessPath::Index { .. } => "index",
        }
    }
}

/// A range as `[low, high)`, with `-inf` / `+inf` for a missing bound.
fn show_range(f: &mut fmt::Formatter<'_>, from: &Bound<String>, to: &Bound<String>) -> fmt::Result {
    match from {
        Bound::Included(v) => write!(f, "[{v:?}, ")?,
        Bound::Excluded(v) => write!(f, "({v:?}, ")?,
        Bound::Unbounded => f.write_str("(-inf, ")?,
    }
    match to {
        Bound::Included(v) => write!(f, "{v:?}]"),
        Bound::Excluded(v) => write!(f, "{v:?})"),
        Bound::Unbounded => f.write_str("+inf)"),
    }
}

fn show_key_range(f: &mut fmt::Formatter<'_>, range: &KeyRange) -> fmt::Result {
    match range {
        KeyRange::Rows {
            partition_key,
            from: Bound::Unbounded,
            to: Bound::Unbounded,
        } => write!(f, "{partition_key:?}"),
        KeyRange::Rows {
            partition_key,
            from,
            to,
        } => {
            write!(f, "{partition_key:?} rows ")?;
            show_range(f, from, to)
        }
        KeyRange::Partitions { from, to } => show_range(f, from, to),
    }
}

/// Up to five items, then how many more there are: `[a, b, ... 3 more]`.
fn show_items<T>(
    f: &mut fmt::Formatter<'_>,
    items: &[T],
    show: impl Fn(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    const SHOWN: usize = 5;
    f.write_str(" [")?;
    for (i, item) in items.iter().take(SHOWN).enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        show(f, item)?;
    }
    if items.len() > SHOWN {
        write!(f, ", ... {} more", items.len() - SHOWN)?;
    }
    f.write_str("]")
}

impl fmt::Display for AccessPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())?;
        match self {
            AccessPath::Points(keys) => show_items(f, keys, |f, k| {
                write!(f, "({:?}, {:?})", k.partition_key, k.row_key)
            }),
            AccessPath::Ranges(ranges) => show_items(f, ranges, show_key_range),
            AccessPath::Table => Ok(()),
            AccessPath::Index { index, ranges } => {
                write!(f, " {}", index.name)?;
                show_items(f, ranges, show_key_range)
            }
        }
    }
}

/// What the filters say about one key column.
#[derive(Default, Debug)]
struct Constraint {
    /// The column is one of these values.
    values: Option<Vec<Value>>,
    lower: Option<(Value, bool)>,
    upper: Option<(Value, bool)>,
    /// The column starts with this text (`LIKE 'prefix%'`).
    prefix: Option<String>,
}

/// A literal as a value of the column's type, when it converts exactly.
pub(super) fn literal_value(ty: SqlType, literal: &ScalarValue) -> Option<Value> {
    use ScalarValue as S;
    let int = |v: i128| -> Option<Value> {
        match ty {
            SqlType::Int2 => i16::try_from(v).ok().map(|v| Value::Int32(v.into())),
            SqlType::Int4 => i32::try_from(v).ok().map(Value::Int32),
            SqlType::Int8 => i64::try_from(v).ok().map(Value::Int64),
            SqlType::Numeric { scale, .. } => Some(Value::Decimal(Decimal::new(
                v.checked_mul(10i128.pow(scale.into()))?,
                scale,
            )?)),
            _ => None,
        }
    };
    match (ty, literal) {
        (_, s) if s.is_null() => None,
        (
            SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_),
            S::Utf8(Some(s)) | S::Utf8View(Some(s)) | S::LargeUtf8(Some(s)),
        ) => Some(Value::String(s.clone())),
        (SqlType::Uuid, S::Utf8(Some(s)) | S::Utf8View(Some(s)) | S::LargeUtf8(Some(s))) => {
            parse_uuid(s).map(Value::Guid)
        }
        (_, S::Int8(Some(v))) => int((*v).into()),
        (_, S::Int16(Some(v))) => int((*v).into()),
        (_, S::Int32(Some(v))) => int((*v).into()),
        (_, S::Int64(Some(v))) => int((*v).into()),
        (SqlType::Numeric { scale, .. }, S::Decimal128(Some(v), _, s)) => {
            let s = u8::try_from(*s).ok()?;
            let unscaled = if s <= scale {
                v.checked_mul(10i128.pow((scale - s).into()))?
            } else {
                let div = 10i128.pow((s - scale).into());
                (v % div == 0).then_some(v / div)?
            };
            Some(Value::Decimal(Decimal::new(unscaled, scale)?))
        }
        (SqlType::Float4 | SqlType::Float8, S::Float64(Some(v))) => Some(Value::Double(*v)),
        (SqlType::Float4 | SqlType::Float8, S::Float32(Some(v))) => {
            Some(Value::Double(f64::from(*v)))
        }
        (SqlType::Bool, S::Boolean(Some(v))) => Some(Value::Boolean(*v)),
        (SqlType::Date, S::Date32(Some(v))) => Some(Value::Date(Date(*v))),
        (SqlType::Time, S::Time64Microsecond(Some(v))) => Some(Value::Int64(*v)),
        (SqlType::Timestamp | SqlType::Timestamptz, S::TimestampMicrosecond(Some(v), _)) => {
            Some(Value::DateTime(DateTime(*v)))
        }
        (SqlType::Bytea, S::Binary(Some(v)) | S::LargeBinary(Some(v)) | S::BinaryView(Some(v))) => {
            Some(Value::Binary(v.clone()))
        }
        _ => None,
    }
}

fn column_of(def: &TableDef, expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Column(c) => def.column_index(&c.name),
        _ => None,
    }
}

fn literal_of(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

fn flip(op: Operator) -> Operator {
    match op {
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        other => other,
    }
}

/// Keeps the tighter of two bounds (`upper` chooses the smaller).
fn tighter(
    old: Option<(Value, bool)>,
    new: (Value, bool),
    ty: SqlType,
    upper: bool,
) -> Option<(Value, bool)> {
    let Some(old) = old else { return Some(new) };
    let enc = |v: &Value| encode_component("", ty, v).ok();
    match (enc(&old.0), enc(&new.0)) {
        (Some(a), Some(b)) => {
            let new_wins = if upper {
                b < a || (b == a && !new.1)
            } else {
                b > a || (b == a && !new.1)
            };
            Some(if new_wins { new } else { old })
        }
        _ => Some(old),
    }
}

/// `c = a OR c = b OR ...` on one column: its values.
fn or_of_values(def: &TableDef, expr: &Expr) -> Option<(usize, Vec<Value>)> {
    let mut branches = Vec::new();
    split_or(expr, &mut branches);
    let mut column = None;
    let mut values = Vec::new();
    for branch in branches {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = branch
        else {
            return None;
        };
        let (c, literal) = match (
            column_of(def, left),
            literal_of(right),
            column_of(def, right),
            literal_of(left),
        ) {
            (Some(c), Some(l), _, _) | (_, _, Some(c), Some(l)) => (c, l),
            _ => return None,
        };
        if *column.get_or_insert(c) != c {
            return None;
        }
        values.push(literal_value(def.columns[c].ty, literal)?);
    }
    Some((column?, values))
}

/// Reads one conjunct into the constraints of the key columns.
fn constrain(def: &TableDef, expr: &Expr, constraints: &mut [Constraint]) {
    if let Some((column, values)) = or_of_values(def, expr) {
        constraints[column].values = Some(values);
        return;
    }
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, op, literal) = match (
                column_of(def, left),
                literal_of(right),
                column_of(def, right),
                literal_of(left),
            ) {
                (Some(c), Some(l), _, _) => (c, *op, l),
                (_, _, Some(c), Some(l)) => (c, flip(*op), l),
                _ => return,
            };
            let ty = def.columns[column].ty;
            let Some(value) = literal_value(ty, literal) else {
                return;
            };
            let c = &mut constraints[column];
            match op {
                Operator::Eq => c.values = Some(vec![value]),
                Operator::Gt => c.lower = tighter(c.lower.take(), (value, false), ty, false),
                Operator::GtEq => c.lower = tighter(c.lower.take(), (value, true), ty, false),
                Operator::Lt => c.upper = tighter(c.upper.take(), (value, false), ty, true),
                Operator::LtEq => c.upper = tighter(c.upper.take(), (value, true), ty, true),
                _ => {}
            }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let Some(column) = column_of(def, expr) else {
                return;
            };
            let ty = def.columns[column].ty;
            if let (Some(lo), Some(hi)) = (
                literal_of(low).and_then(|l| literal_value(ty, l)),
                literal_of(high).and_then(|l| literal_value(ty, l)),
            ) {
                let c = &mut constraints[column];
                c.lower = tighter(c.lower.take(), (lo, true), ty, false);
                c.upper = tighter(c.upper.take(), (hi, true), ty, true);
            }
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let Some(column) = column_of(def, expr) else {
                return;
            };
            let ty = def.columns[column].ty;
            let values: Option<Vec<Value>> = list
                .iter()
                .map(|e| literal_of(e).and_then(|l| literal_value(ty, l)))
                .collect();
            if let Some(values) = values {
                constraints[column].values = Some(values);
            }
        }
        Expr::Like(Like {
            negated: false,
            expr,
            pattern,
            escape_char: None,
            case_insensitive: false,
        }) => {
            let Some(column) = column_of(def, expr) else {
                return;
            };
            if !matches!(def.columns[column].ty, SqlType::Text | SqlType::Varchar(_)) {
                return;
            }
            let Some(ScalarValue::Utf8(Some(p)) | ScalarValue::Utf8View(Some(p))) =
                literal_of(pattern)
            else {
                return;
            };
            if let Some(prefix) = p.strip_suffix('%') {
                if !prefix.is_empty() && !prefix.contains(['%', '_', '\\']) {
                    constraints[column].prefix = Some(prefix.to_owned());
                }
            }
        }
        _ => {}
    }
}

fn constraints_of<'a>(
    def: &TableDef,
    conjuncts: impl IntoIterator<Item = &'a Expr>,
) -> Vec<Constraint> {
    let mut constraints: Vec<Constraint> =
        def.columns.iter().map(|_| Constraint::default()).collect();
    for expr in conjuncts {
        constrain(def, expr, &mut constraints);
    }
    constraints
}

/// Every combination of the listed columns' values, encoded as key components,
/// or `None` if some column has no value list or there are too many.
fn combinations(
    def: &TableDef,
    columns: &[usize],
    constraints: &[Constraint],
) -> Option<Vec<Vec<String>>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for &i in columns {
        let values = constraints[i].values.as_ref()?;
        let column = &def.columns[i];
        // A value a key cannot hold matches no row: drop it.
        let encoded: Vec<String> = values
            .iter()
            .filter_map(|v| encode_component(&column.name, column.ty, v).ok())
            .collect();
        if out.len().saturating_mul(encoded.len()) > MAX_KEYS {
            return None;
        }
        out = out
            .iter()
            .flat_map(|prefix| {
                encoded
                    .iter()
                    .map(move |e| [prefix.clone(), vec![e.clone()]].concat())
            })
            .collect();
    }
    Some(out)
}

/// The escaped form of a component that is followed by others (see `catalog::keys`).
fn inner(component: &str) -> String {
    component.replace(' ', " !")
}

/// The smallest string above every string that starts with `prefix`.
fn successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        while next <= char::MAX as u32 {
            if let Some(c) = char::from_u32(next) {
                chars.push(c);
                return Some(chars.into_iter().collect());
            }
            next += 1;
        }
    }
    None
}

/// The bounds, within one key string, of a column that comes after the fixed
/// `prefix`; `last` says whether it is the key's last component.
fn component_bounds(
    def: &TableDef,
    column: usize,
    c: &Constraint,
    prefix: &str,
    last: bool,
) -> (Bound<String>, Bound<String>) {
    let col = &def.columns[column];
    let enc = |v: &Value| encode_component(&col.name, col.ty, v).ok();
    let lower = match (&c.lower, &c.prefix) {
        (Some((v, inclusive)), _) => match (enc(v), last) {
            (Some(e), true) if *inclusive => Bound::Included(format!("{prefix}{e}")),
            (Some(e), true) => Bound::Excluded(format!("{prefix}{e}")),
            (Some(e), false) => Bound::Included(format!("{prefix}{}  ", inner(&e))),
            (None, _) => Bound::Included(prefix.to_owned()),
        },
        (None, Some(p)) => Bound::Included(format!(
            "{prefix}{}",
            if last { p.clone() } else { inner(p) }
        )),
        (None, None) => Bound::Included(prefix.to_owned()),
    };
    let prefix_end = || match successor(prefix) {
        Some(s) if !prefix.is_empty() => Bound::Excluded(s),
        _ => Bound::Unbounded,
    };
    let upper = match (&c.upper, &c.prefix) {
        (Some((v, inclusive)), _) => match (enc(v), last) {
            (Some(e), true) if *inclusive => Bound::Included(format!("{prefix}{e}")),
            (Some(e), true) => Bound::Excluded(format!("{prefix}{e}")),
            (Some(e), false) => Bound::Excluded(format!("{prefix}{} !", inner(&e))),
            (None, _) => prefix_end(),
        },
        (None, Some(p)) => match successor(p) {
            Some(s) => Bound::Excluded(format!("{prefix}{}", if last { s } else { inner(&s) })),
            None => prefix_end(),
        },
        (None, None) => prefix_end(),
    };
    (lower, upper)
}

/// The fixed part of a key made of these leading components (each followed by more).
fn fixed_prefix(components: &[String]) -> String {
    components
        .iter()
        .map(|c| format!("{}  ", inner(c)))
        .collect()
}

/// Decides the access path for a scan of `def` with these filters (a conjunction).
pub fn access_path(def: &TableDef, filters: &[Expr]) -> AccessPath {
    let Keys::Columns { partition, row } = &def.keys else {
        return AccessPath::Table;
    };
    let conjuncts: Vec<&Expr> = filters.iter().flat_map(split_conjunction).collect();

    if let Some(points) = or_of_points(def, partition, row, &conjuncts) {
        return AccessPath::Points(points);
    }

    let constraints = constraints_of(def, conjuncts.iter().copied());
    let Some(partitions) = combinations(def, partition, &constraints) else {
        return partition_range(def, partition, &constraints);
    };
    let mut partitions: Vec<String> = partitions.iter().map(|p| join_components(p)).collect();
    partitions.sort();
    partitions.dedup();

    let fixed = row
        .iter()
        .take_while(|&&i| constraints[i].values.is_some())
        .count();
    if fixed == row.len() {
        if let Some(rows) = combinations(def, row, &constraints) {
            if partitions.len().saturating_mul(rows.len()) <= MAX_KEYS {
                let mut keys: Vec<EntityKey> = partitions
                    .iter()
                    .flat_map(|pk| {
                        rows.iter()
                            .map(move |r| EntityKey::new(pk.clone(), join_components(r)))
                    })
                    .collect();
                keys.sort();
                keys.dedup();
                return AccessPath::Points(keys);
            }
        }
    }
    let prefixes =
        combinations(def, &row[..fixed], &constraints).unwrap_or_else(|| vec![Vec::new()]);
    let prefixes = if partitions.len().saturating_mul(prefixes.len()) > MAX_KEYS {
        vec![Vec::new()]
    } else {
        prefixes
    };
    let mut ranges = Vec::new();
    for pk in &partitions {
        for p in &prefixes {
            let prefix = fixed_prefix(p);
            let (from, to) = match row.get(p.len()) {
                Some(&next) => component_bounds(
                    def,
                    next,
                    &constraints[next],
                    &prefix,
                    p.len() + 1 == row.len(),
                ),
                None => (Bound::Unbounded, Bound::Unbounded),
            };
            let from = if from == Bound::Included(String::new()) {
                Bound::Unbounded
            } else {
                from
            };
            ranges.push(KeyRange::Rows {
                partition_key: pk.clone(),
                from,
                to,
            });
        }
    }
    AccessPath::Ranges(ranges)
}

/// A range of whole partitions from the first partition column, or a table scan.
fn partition_range(def: &TableDef, partition: &[usize], constraints: &[Constraint]) -> AccessPath {
    let Some(&first) = partition.first() else {
        return AccessPath::Table;
    };
    let c = &constraints[first];
    if c.lower.is_none() && c.upper.is_none() && c.prefix.is_none() {
        return AccessPath::Table;
    }
    let (from, to) = component_bounds(def, first, c, "", partition.len() == 1);
    let from = if from == Bound::Included(String::new()) {
        Bound::Unbounded
    } else {
        from
    };
    AccessPath::Ranges(vec![KeyRange::Partitions { from, to }])
}

/// `(k1 = a AND k2 = b) OR (k1 = c AND k2 = d) ...` where every branch names a
/// whole key: the keys.
fn or_of_points(
    def: &TableDef,
    partition: &[usize],
    row: &[usize],
    conjuncts: &[&Expr],
) -> Option<Vec<EntityKey>> {
    for expr in conjuncts {
        let Expr::BinaryExpr(BinaryExpr {
            op: Operator::Or, ..
        }) = expr
        else {
            continue;
        };
        let mut branches = Vec::new();
        split_or(expr, &mut branches);
        let mut keys = Vec::new();
        for branch in branches {
            let constraints = constraints_of(def, split_conjunction(branch));
            let pks = combinations(def, partition, &constraints)?;
            let rks = combinations(def, row, &constraints)?;
            for pk in &pks {
                for rk in &rks {
                    keys.push(EntityKey::new(join_components(pk), join_components(rk)));
                }
            }
            if keys.len() > MAX_KEYS {
                return None;
            }
        }
        keys.sort();
        keys.dedup();
        return Some(keys);
    }
    None
}

fn split_or<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            split_or(left, out);
            split_or(right, out);
        }
        other => out.push(other),
    }
}

/// Point gets a piece of a split scan makes at least.
const MIN_POINTS_PER_PIECE: usize = 256;

/// The index lookup for the filters, when one helps: the values of an index
/// whose every column is given one or a few values (`=`, `IN`), else the
/// entries under the values of its leading columns, narrowed by a range on
/// the next one (`<`, `>`, `BETWEEN`; not on text, whose escaped form in
/// an index does not keep its order). The index that fixes most leading
/// columns wins; `None` when no index fixes any.
pub fn index_path(def: &TableDef, filters: &[Expr]) -> Option<AccessPath> {
    let conjuncts: Vec<&Expr> = filters.iter().flat_map(split_conjunction).collect();
    let constraints = constraints_of(def, conjuncts.iter().copied());
    let mut best: Option<(usize, AccessPath)> = None;
    for index in def.indexes.iter().filter(|i| !i.building) {
        let Some((score, ranges)) = index_ranges(def, index, &constraints) else {
            continue;
        };
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((
                score,
                AccessPath::Index {
                    index: index.clone(),
                    ranges,
                },
            ));
        }
    }
    best.map(|(_, path)| path)
}

/// The index key ranges the constraints give, and how much they narrow
/// (twice the leading columns fixed, plus one for a range after them).
fn index_ranges(
    def: &TableDef,
    index: &IndexDef,
    constraints: &[Constraint],
) -> Option<(usize, Vec<KeyRange>)> {
    let mut prefixes: Vec<Vec<String>> = vec![Vec::new()];
    let mut fixed = 0;
    for name in &index.columns {
        let i = def.column_index(name)?;
        let column = &def.columns[i];
        let Some(values) = &constraints[i].values else {
            break;
        };
        let encoded: Vec<String> = values
            .iter()
            .filter_map(|v| encode_index_component(&column.name, column.ty, v).ok())
            .collect();
        if prefixes.len().saturating_mul(encoded.len()) > MAX_KEYS {
            return None;
        }
        prefixes = prefixes
            .iter()
            .flat_map(|prefix| {
                encoded
                    .iter()
                    .map(move |v| [prefix.clone(), vec![v.clone()]].concat())
            })
            .collect();
        fixed += 1;
    }
    if index.intra_partition {
        return intra_partition_ranges(def, index, constraints, &prefixes, fixed);
    }
    if fixed == index.columns.len() {
        let mut values: Vec<String> = prefixes.iter().map(|p| join_components(p)).collect();
        values.sort();
        values.dedup();
        let ranges = values
            .into_iter()
            .map(|partition_key| KeyRange::Rows {
                partition_key,
                from: Bound::Unbounded,
                to: Bound::Unbounded,
            })
            .collect();
        return Some((2 * fixed, ranges));
    }
    // The next column: a range on it, unless it is text.
    let next = def.column_index(&index.columns[fixed])?;
    let c = &constraints[next];
    let text = matches!(
        def.columns[next].ty,
        SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_)
    );
    let ranged = !text && (c.lower.is_some() || c.upper.is_some());
    if fixed == 0 && !ranged {
        return None;
    }
    if leaves_nullable_free(def, index, fixed + usize::from(ranged)) {
        return None;
    }
    let unbounded = Constraint::default();
    let last = fixed + 1 == index.columns.len();
    let mut ranges: Vec<KeyRange> = prefixes
        .iter()
        .map(|prefix| {
            let (from, to) = component_bounds(
                def,
                next,
                if ranged { c } else { &unbounded },
                &fixed_prefix(prefix),
                last,
            );
            KeyRange::Partitions { from, to }
        })
        .collect();
    ranges.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    Some((2 * fixed + usize::from(ranged), ranges))
}

/// Rows with a NULL in an indexed column have no entry: a lookup that
/// leaves the columns from `constrained` on free would miss those rows,
/// unless they cannot be NULL.
fn leaves_nullable_free(def: &TableDef, index: &IndexDef, constrained: usize) -> bool {
    index.columns[constrained.min(index.columns.len())..]
        .iter()
        .any(|name| {
            def.column_index(name)
                .is_none_or(|i| def.columns[i].nullable && !def.is_key_column(i))
        })
}

/// The ranges of an intra-partition index: within each base partition the
/// filters fix, the entries (RowKey: the values, then the base RowKey)
/// under the fixed leading values, narrowed by a range on the next column.
fn intra_partition_ranges(
    def: &TableDef,
    index: &IndexDef,
    constraints: &[Constraint],
    prefixes: &[Vec<String>],
    fixed: usize,
) -> Option<(usize, Vec<KeyRange>)> {
    let Keys::Columns { partition, .. } = &def.keys else {
        return None;
    };
    let partitions = combinations(def, partition, constraints)?;
    let next = index
        .columns
        .get(fixed)
        .and_then(|name| def.column_index(name));
    let unbounded = Constraint::default();
    let ranged = next.is_some_and(|i| {
        let c = &constraints[i];
        let text = matches!(
            def.columns[i].ty,
            SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_)
        );
        !text && (c.lower.is_some() || c.upper.is_some())
    });
    if (fixed == 0 && !ranged) || leaves_nullable_free(def, index, fixed + usize::from(ranged)) {
        return None;
    }
    let mut ranges = Vec::new();
    for pk in &partitions {
        let partition_key = join_components(pk);
        for prefix in prefixes {
            let (from, to) = match next {
                Some(i) if ranged => {
                    component_bounds(def, i, &constraints[i], &fixed_prefix(prefix), false)
                }
                // Every value fixed, or no range on the next one: the
                // entries under the fixed values.
                _ => component_bounds(def, 0, &unbounded, &fixed_prefix(prefix), false),
            };
            ranges.push(KeyRange::Rows {
                partition_key: partition_key.clone(),
                from,
                to,
            });
        }
    }
    if ranges.len() > MAX_KEYS {
        return None;
    }
    // The partition columns are fixed too.
    Some((2 * (fixed + partition.len()) + usize::from(ranged), ranges))
}

/// The index entries of the rows whose columns hold `values` (a column and
/// its value for each of the index's columns): one range of them, or none
/// when a value cannot be indexed.
pub fn index_equality(
    def: &TableDef,
    index: &IndexDef,
    values: &[(usize, Value)],
) -> Vec<KeyRange> {
    let mut constraints: Vec<Constraint> =
        def.columns.iter().map(|_| Constraint::default()).collect();
    for (column, value) in values {
        constraints[*column].values = Some(vec![value.clone()]);
    }
    index_ranges(def, index, &constraints).map_or_else(Vec::new, |(_, r)| r)
}

/// The access path for rows whose `column` holds one of `values` (the keys
/// a join's other side holds): point gets when the column is the whole
/// key, partition scans when it is the partition key of a compound key
/// (both in key order), else an index whose leading column it is (in the
/// index's order); `None` when none applies.
pub fn lookup_path(
    def: &TableDef,
    column: usize,
    values: Vec<Value>,
    indexes_usable: bool,
) -> Option<AccessPath> {
    // The join lists a value once per row of its other side.
    let mut seen = std::collections::HashSet::new();
    let values: Vec<Value> = values
        .into_iter()
        .filter(|v| seen.insert(format!("{v:?}")))
        .collect();
    let mut constraints: Vec<Constraint> =
        def.columns.iter().map(|_| Constraint::default()).collect();
    constraints[column].values = Some(values);
    let Keys::Columns { partition, row } = &def.keys else {
        return None;
    };
    if partition == &[column] {
        let pks = combinations(def, partition, &constraints)?;
        // In key order, the order a scan of the table gives its rows in.
        let mut keys: Vec<String> = pks.into_iter().map(|pk| join_components(&pk)).collect();
        keys.sort_unstable();
        keys.dedup();
        let keys = keys.into_iter();
        return Some(if row.is_empty() {
            AccessPath::Points(keys.map(|pk| EntityKey::new(pk, "")).collect())
        } else {
            AccessPath::Ranges(
                keys.map(|partition_key| KeyRange::Rows {
                    partition_key,
                    from: Bound::Unbounded,
                    to: Bound::Unbounded,
                })
                .collect(),
            )
        });
    }
    if !indexes_usable {
        return None;
    }
    def.indexes
        .iter()
        .filter(|i| !i.building && !i.intra_partition)
        .filter(|i| {
            i.columns
                .first()
                .is_some_and(|c| *c == def.columns[column].name)
        })
        .find_map(|index| {
            let (_, ranges) = index_ranges(def, index, &constraints)?;
            Some(AccessPath::Index {
                index: index.clone(),
                ranges,
            })
        })
}

/// Piece `piece` of `pieces` of a path of points or ranges (every
/// `pieces`-th one); other paths whole to piece 0.
pub fn share(access: AccessPath, piece: usize, pieces: usize) -> Option<AccessPath> {
    fn mine<T>(items: Vec<T>, piece: usize, pieces: usize) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % pieces.max(1) == piece)
            .map(|(_, item)| item)
            .collect()
    }
    Some(match access {
        AccessPath::Points(keys) => AccessPath::Points(mine(keys, piece, pieces)),
        AccessPath::Ranges(ranges) => AccessPath::Ranges(mine(ranges, piece, pieces)),
        AccessPath::Index { index, ranges } => AccessPath::Index {
            index,
            ranges: mine(ranges, piece, pieces),
        },
        whole => return (piece == 0).then_some(whole),
    })
}

/// Whether cutting `access` into pieces needs the table's split points.
pub fn needs_split_points(access: &AccessPath) -> bool {
    matches!(access, AccessPath::Table)
        || matches!(access, AccessPath::Ranges(r) if matches!(r.as_slice(), [KeyRange::Partitions { .. }]))
}

/// Cuts an access path into at most `parts` pieces that together read the
/// same keys, each in key order, so the pieces can be scanned in parallel.
/// Whole-table and PartitionKey-range scans are cut at `points` (from
/// [`crate::store::Statistics::split_points`]); lists of ranges and of
/// points are cut into runs of about equal length.
pub fn split(access: &AccessPath, points: &[String], parts: usize) -> Vec<AccessPath> {
    fn chunks<T: Clone>(items: &[T], parts: usize) -> Vec<Vec<T>> {
        let size = items.len().div_ceil(parts.max(1));
        items.chunks(size.max(1)).map(<[T]>::to_vec).collect()
    }
    let pieces = match access {
        AccessPath::Table => split_partitions(Bound::Unbounded, Bound::Unbounded, points),
        AccessPath::Ranges(ranges) => match ranges.as_slice() {
            [KeyRange::Partitions { from, to }] => {
                split_partitions(from.clone(), to.clone(), points)
            }
            _ => chunks(ranges, parts)
                .into_iter()
                .map(AccessPath::Ranges)
                .collect(),
        },
        AccessPath::Index { .. } => return vec![access.clone()],
        AccessPath::Points(keys) => {
            let parts = parts.min(keys.len() / MIN_POINTS_PER_PIECE).max(1);
            chunks(keys, parts)
                .into_iter()
                .map(AccessPath::Points)
                .collect()
        }
    };
    if pieces.len() < 2 {
        return vec![access.clone()];
    }
    pieces
}

/// A PartitionKey range cut at the points that fall strictly inside it.
fn split_partitions(from: Bound<String>, to: Bound<String>, points: &[String]) -> Vec<AccessPath> {
    let inside: Vec<&String> = points
        .iter()
        .filter(|p| {
            let above = match &from {
                Bound::Included(f) | Bound::Excluded(f) => p.as_str() > f.as_str(),
                Bound::Unbounded => true,
            };
            let below = match &to {
                Bound::Included(t) | Bound::Excluded(t) => p.as_str() < t.as_str(),
                Bound::Unbounded => true,
            };
            above && below
        })
        .collect();
    let mut lows = vec![from];
    lows.extend(inside.iter().map(|p| Bound::Included((*p).clone())));
    let mut highs: Vec<Bound<String>> = inside
        .iter()
        .map(|p| Bound::Excluded((*p).clone()))
        .collect();
    highs.push(to);
    lows.into_iter()
        .zip(highs)
        .map(|(from, to)| AccessPath::Ranges(vec![KeyRange::Partitions { from, to }]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Column;
    use datafusion::prelude::{col, lit};

    fn employees() -> TableDef {
        let column = |name: &str, ty| Column {
            nullable: false,
            ..Column::new(name, ty)
        };
        TableDef::new(
            "employees",
            vec![
                column("dept", SqlType::Text),
                column("id", SqlType::Int4),
                column("name", SqlType::Text),
            ],
            Keys::Columns {
                partition: vec![0],
                row: vec![1],
            },
        )
    }

    fn check(filters: Vec<Expr>, expected: &str) {
        assert_eq!(access_path(&employees(), &filters).to_string(), expected);
    }

    #[test]
    fn shapes() {
        check(
            vec![col("dept").eq(lit("Sales")), col("id").eq(lit(7))],
            r#"point [("Sales", "0000000007")]"#,
        );
        check(
            vec![
                col("dept").eq(lit("Sales")),
                col("id").in_list(vec![lit(2), lit(1)], false),
            ],
            r#"multi-point [("Sales", "0000000001"), ("Sales", "0000000002")]"#,
        );
        check(
            vec![col("dept")
                .eq(lit("Sales"))
                .and(col("id").eq(lit(1)))
                .or(col("dept").eq(lit("HR")).and(col("id").eq(lit(2))))],
            r#"multi-point [("HR", "0000000002"), ("Sales", "0000000001")]"#,
        );
        check(
            vec![
                col("dept").eq(lit("Sales")),
                col("id").gt_eq(lit(10)),
                col("id").lt(lit(20)),
            ],
            r#"range ["Sales" rows ["0000000010", "0000000020")]"#,
        );
        check(
            vec![col("dept").eq(lit("Sales")), col("name").eq(lit("Ann"))],
            r#"partition ["Sales"]"#,
        );
        check(
            vec![col("dept").in_list(vec![lit("B"), lit("A")], false)],
            r#"partition ["A", "B"]"#,
        );
        check(
            vec![col("dept").like(lit("Sa%"))],
            r#"partition-range [["Sa", "Sb")]"#,
        );
        check(vec![col("name").eq(lit("Ann"))], "table");
        check(vec![col("dept").eq(lit("a/b"))], "partition []");
        check(
            vec![
                col("dept").eq(lit("S")),
                col("id").in_list((1..=7).map(lit).collect(), false),
            ],
            r#"multi-point [("S", "0000000001"), ("S", "0000000002"), ("S", "0000000003"), ("S", "0000000004"), ("S", "0000000005"), ... 2 more]"#,
        );
        check(
            vec![col("dept").gt(lit("M"))],
            r#"partition-range [("M", +inf)]"#,
        );
    }

    #[test]
    fn tighter_bounds_win() {
        check(
            vec![
                col("dept").eq(lit("S")),
                col("id").gt(lit(1)),
                col("id").gt(lit(5)),
                col("id").lt_eq(lit(9)),
            ],
            r#"range ["S" rows ("0000000005", "0000000009"]]"#,
        );
    }

    fn partitions(from: Bound<&str>, to: Bound<&str>) -> AccessPath {
        AccessPath::Ranges(vec![KeyRange::Partitions {
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
        }])
    }

    #[test]
    fn table_scans_split_at_points() {
        let points = ["g".to_owned(), "p".to_owned()];
        assert_eq!(
            split(&AccessPath::Table, &points, 3),
            vec![
                partitions(Bound::Unbounded, Bound::Excluded("g")),
                partitions(Bound::Included("g"), Bound::Excluded("p")),
                partitions(Bound::Included("p"), Bound::Unbounded),
            ]
        );
        assert_eq!(split(&AccessPath::Table, &[], 3), vec![AccessPath::Table]);
    }

    #[test]
    fn partition_ranges_split_only_inside_their_bounds() {
        let points = ["b".to_owned(), "g".to_owned(), "p".to_owned()];
        let range = partitions(Bound::Excluded("b"), Bound::Included("m"));
        assert_eq!(
            split(&range, &points, 4),
            vec![
                partitions(Bound::Excluded("b"), Bound::Excluded("g")),
                partitions(Bound::Included("g"), Bound::Included("m")),
            ]
        );
        let narrow = partitions(Bound::Included("h"), Bound::Excluded("k"));
        assert_eq!(split(&narrow, &points, 4), vec![narrow.clone()]);
    }

    #[test]
    fn lists_split_into_runs() {
        let ranges: Vec<KeyRange> = (0..5)
            .map(|i| KeyRange::Rows {
                partition_key: format!("p{i}"),
                from: Bound::Unbounded,
                to: Bound::Unbounded,
            })
            .collect();
        let pieces = split(&AccessPath::Ranges(ranges.clone()), &[], 2);
        assert_eq!(
            pieces,
            vec![
                AccessPath::Ranges(ranges[..3].to_vec()),
                AccessPath::Ranges(ranges[3..].to_vec()),
            ]
        );
        let keys: Vec<EntityKey> = (0..600)
            .map(|i| EntityKey::new("p", format!("{i:04}")))
            .collect();
        assert_eq!(split(&AccessPath::Points(keys.clone()), &[], 2).len(), 2);
        assert_eq!(
            split(&AccessPath::Points(keys[..300].to_vec()), &[], 2).len(),
            1
        );
    }
}
