//! Materialized views: their definitions, and what a change of a base row
//! does to their rows. A view is a table of its own (queried, keyed and
//! pushed down like any other) whose rows writes to its base tables keep
//! current, for three shapes of the seeds' patterns:
//!
//! - a filtered, projected copy of one table under another key (the
//!   inter-partition secondary index and denormalization patterns);
//! - the same, with the columns of the row of another table that the base
//!   row's columns give the key of (a key join: employees with their
//!   department's name);
//! - one row per group of a table, with COUNT, SUM, MIN, MAX and AVG (the
//!   summary entities of the denormalization pattern).
//!
//! Everything here is a pure function of definitions and rows; the catalog
//! reads the rows and commits what they give with the base write.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::table::{Row, RowError, TableDef};
use super::types::SqlType;
use crate::model::{Decimal, Entity, Value};

/// `CREATE MATERIALIZED VIEW name AS query`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewDef {
    /// The defining query, as SQL text.
    pub query: String,
    /// How writes to its base tables keep it current; `None` for a query of
    /// another shape, which `REFRESH MATERIALIZED VIEW` recomputes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintained: Option<Maintained>,
}

impl ViewDef {
    /// The tables whose writes change the view.
    pub fn base_tables(&self) -> Vec<&str> {
        let Some(m) = &self.maintained else {
            return Vec::new();
        };
        let mut tables = vec![m.table.as_str()];
        if let Shape::Rows {
            join: Some(join), ..
        } = &m.shape
        {
            tables.push(join.table.as_str());
        }
        tables
    }
}

/// `CREATE VIEW name AS query`: a view without rows of its own; a query
/// that names it reads its query in its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlainView {
    /// The defining query, as SQL text.
    pub query: String,
    /// The tables and views the query names, which cannot be dropped while
    /// the view reads them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<String>,
}

/// A view that every write keeps current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Maintained {
    /// The table whose rows make the view's rows.
    pub table: String,
    /// Which rows count (over the base row and, for a key join, the joined row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Predicate>,
    pub shape: Shape,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A view row per base row, one view column per source.
    Rows {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        join: Option<KeyJoin>,
        columns: Vec<Source>,
    },
    /// A view row per group of base rows, one view column per item.
    Groups {
        group: Vec<String>,
        columns: Vec<GroupItem>,
    },
}

/// `JOIN table ON base.on = table.key`: the base row's `on` columns hold
/// the joined table's primary key, in key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyJoin {
    pub table: String,
    pub on: Vec<String>,
    /// LEFT JOIN: a base row without a joined row still has a view row.
    pub outer: bool,
}

/// Where a view column's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Base(String),
    Joined(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupItem {
    Group(String),
    /// An aggregate of a base column (`None`: `COUNT(*)`).
    Aggregate {
        function: Aggregate,
        column: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

/// A filter over a base row (and its joined row), with SQL's three-valued
/// logic: a row counts when the predicate is true, not when it is NULL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicate {
    Compare {
        column: Source,
        op: CompareOp,
        value: Value,
    },
    InList {
        column: Source,
        values: Vec<Value>,
        negated: bool,
    },
    IsNull {
        column: Source,
        negated: bool,
    },
    And(Box<Predicate>, Box<Predicate>),
    Or(Box<Predicate>, Box<Predicate>),
    Not(Box<Predicate>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

/// Values that cannot be serialized as JSON of their own (the catalog
/// stores definitions as JSON) travel as this.
mod value_serde {
    use super::*;
    use serde::{Deserializer, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Stored {
        String(String),
        Int32(i32),
        Int64(i64),
        Double(f64),
        Boolean(bool),
        DateTime(i64),
        Guid([u8; 16]),
        Binary(Vec<u8>),
        Decimal { unscaled: String, scale: u8 },
        Date(i32),
        Json(String),
    }

    impl Serialize for Value {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let stored = match self.clone() {
                Value::String(v) => Stored::String(v),
                Value::Int32(v) => Stored::Int32(v),
                Value::Int64(v) => Stored::Int64(v),
                Value::Double(v) => Stored::Double(v),
                Value::Boolean(v) => Stored::Boolean(v),
                Value::DateTime(v) => Stored::DateTime(v.0),
                Value::Guid(v) => Stored::Guid(v.0),
                Value::Binary(v) => Stored::Binary(v),
                Value::Decimal(v) => Stored::Decimal {
                    unscaled: v.unscaled.to_string(),
                    scale: v.scale,
                },
                Value::Date(v) => Stored::Date(v.0),
                Value::Json(v) => Stored::Json(v),
            };
            stored.serialize(s)
        }
    }

    impl<'de> Deserialize<'de> for Value {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            use crate::model::{Date, DateTime, Guid};
            Ok(match Stored::deserialize(d)? {
                Stored::String(v) => Value::String(v),
                Stored::Int32(v) => Value::Int32(v),
                Stored::Int64(v) => Value::Int64(v),
                Stored::Double(v) => Value::Double(v),
                Stored::Boolean(v) => Value::Boolean(v),
                Stored::DateTime(v) => Value::DateTime(DateTime(v)),
                Stored::Guid(v) => Value::Guid(Guid(v)),
                Stored::Binary(v) => Value::Binary(v),
                Stored::Decimal { unscaled, scale } => Value::Decimal(Decimal {
                    unscaled: unscaled.parse().map_err(serde::de::Error::custom)?,
                    scale,
                }),
                Stored::Date(v) => Value::Date(Date(v)),
                Stored::Json(v) => Value::Json(v),
            })
        }
    }
}

/// A base row with its joined row, as a view's predicate and columns read them.
pub struct Input<'a> {
    pub base: &'a TableDef,
    pub row: &'a Row,
    pub joined: Option<(&'a TableDef, Option<&'a Row>)>,
}

impl Input<'_> {
    fn value(&self, source: &Source) -> Option<Value> {
        let (def, row, name) = match source {
            Source::Base(name) => (self.base, Some(self.row), name),
            Source::Joined(name) => {
                let (def, row) = self.joined?;
                (def, row, name)
            }
        };
        row?[def.column_index(name)?].clone()
    }
}

impl Predicate {
    /// True, false, or NULL (`None`).
    pub fn eval(&self, input: &Input) -> Option<bool> {
        match self {
            Predicate::Compare { column, op, value } => {
                let ordering = input.value(column)?.compare(value)?;
                Some(match op {
                    CompareOp::Eq => ordering == Ordering::Equal,
                    CompareOp::NotEq => ordering != Ordering::Equal,
                    CompareOp::Lt => ordering == Ordering::Less,
                    CompareOp::LtEq => ordering != Ordering::Greater,
                    CompareOp::Gt => ordering == Ordering::Greater,
                    CompareOp::GtEq => ordering != Ordering::Less,
                })
            }
            Predicate::InList {
                column,
                values,
                negated,
            } => {
                let v = input.value(column)?;
                let found = values
                    .iter()
                    .any(|candidate| v.compare(candidate) == Some(Ordering::Equal));
                Some(found != *negated)
            }
            Predicate::IsNull { column, negated } => {
                Some(input.value(column).is_none() != *negated)
            }
            Predicate::And(a, b) => match (a.eval(input), b.eval(input)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Predicate::Or(a, b) => match (a.eval(input), b.eval(input)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Predicate::Not(a) => a.eval(input).map(|b| !b),
        }
    }
}

impl Maintained {
    fn counts(&self, input: &Input) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| f.eval(input) == Some(true))
    }

    /// The view row of a base row, for a view of shape `Rows`: `None` when
    /// the filter drops it, or an inner join finds no joined row.
    pub fn view_row(&self, view: &TableDef, input: &Input) -> Result<Option<Entity>, RowError> {
        let Shape::Rows { join, columns } = &self.shape else {
            return Ok(None);
        };
        let joined_missing = matches!(input.joined, Some((_, None)));
        if join.as_ref().is_some_and(|j| !j.outer) && joined_missing {
            return Ok(None);
        }
        if !self.counts(input) {
            return Ok(None);
        }
        let row: Row = columns.iter().map(|c| input.value(c)).collect();
        view.check_row(&row)?;
        let key = view.entity_key(&row)?;
        Ok(Some(view.row_to_entity(key, &row)?))
    }

    /// The group a base row counts in (its group columns' values), `None`
    /// when the filter drops it.
    pub fn group_of(&self, input: &Input) -> Option<Vec<Option<Value>>> {
        let Shape::Groups { group, .. } = &self.shape else {
            return None;
        };
        if !self.counts(input) {
            return None;
        }
        Some(
            group
                .iter()
                .map(|g| input.value(&Source::Base(g.clone())))
                .collect(),
        )
    }
}

/// Hidden properties of a group's view entity: the running state the
/// visible aggregates are computed from.
const ROWS: &str = "_rows";
fn count_property(i: usize) -> String {
    format!("_count{i}")
}
fn sum_property(i: usize) -> String {
    format!("_sum{i}")
}

/// One group's running state: its row count and, per view column, the
/// count of non-NULL inputs and their sum (or, for MIN and MAX, the extreme).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    pub rows: i64,
    counts: Vec<i64>,
    values: Vec<Option<Value>>,
}

/// A removal that MIN or MAX cannot undo: the group is computed again
/// from its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedsRecompute;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AggregateError(pub String);

impl GroupState {
    pub fn empty(columns: usize) -> Self {
        GroupState {
            rows: 0,
            counts: vec![0; columns],
            values: vec![None; columns],
        }
    }

    /// The state a group's view entity holds.
    pub fn of_entity(view: &TableDef, entity: &Entity) -> Self {
        let columns = view.columns.len();
        let count = |name: &str| match entity.get(name) {
            Some(Value::Int64(n)) => *n,
            _ => 0,
        };
        let mut state = GroupState::empty(columns);
        state.rows = count(ROWS);
        for i in 0..columns {
            state.counts[i] = count(&count_property(i));
            state.values[i] = entity.get(&sum_property(i)).cloned();
        }
        state
    }

    /// Adds a base row to the group (`sign` 1) or takes it away (-1).
    pub fn fold(
        &mut self,
        items: &[GroupItem],
        input: &Input,
        sign: i64,
    ) -> Result<Result<(), NeedsRecompute>, AggregateError> {
        self.rows += sign;
        let mut recompute = false;
        for (i, item) in items.iter().enumerate() {
            let GroupItem::Aggregate {
                function,
                column: Some(column),
            } = item
            else {
                continue;
            };
            let Some(v) = input.value(&Source::Base(column.clone())) else {
                continue;
            };
            self.counts[i] += sign;
            let current = self.values[i].take();
            self.values[i] = match (function, current) {
                (Aggregate::Count, _) => None,
                (Aggregate::Sum | Aggregate::Avg, None) if sign > 0 => Some(v),
                (Aggregate::Sum | Aggregate::Avg, None) => {
                    return Err(AggregateError(
                        "a group's sum lost a row it never had".into(),
                    ))
                }
                (Aggregate::Sum | Aggregate::Avg, Some(sum)) => Some(add(&sum, &v, sign)?),
                (Aggregate::Min | Aggregate::Max, current) if sign < 0 => {
                    // Removing the extreme (or a value that does not
                    // compare) needs the other rows.
                    if self.counts[i] == 0 {
                        None
                    } else {
                        let keeps = current
                            .as_ref()
                            .and_then(|c| c.compare(&v))
                            .is_some_and(|o| {
                                if *function == Aggregate::Min {
                                    o == Ordering::Less
                                } else {
                                    o == Ordering::Greater
                                }
                            });
                        recompute |= !keeps;
                        current
                    }
                }
                (Aggregate::Min | Aggregate::Max, None) => Some(v),
                (Aggregate::Min | Aggregate::Max, Some(current)) => {
                    let replace = v.compare(&current).is_some_and(|o| {
                        if *function == Aggregate::Min {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    });
                    Some(if replace { v } else { current })
                }
            };
        }
        Ok(if recompute {
            Err(NeedsRecompute)
        } else {
            Ok(())
        })
    }

    /// The group's view entity: its visible columns and the hidden state.
    /// `None` once the group has no rows.
    pub fn entity(
        &self,
        view: &TableDef,
        items: &[GroupItem],
        group: &[String],
        key_values: &[Option<Value>],
    ) -> Result<Option<Entity>, RowError> {
        if self.rows <= 0 {
            return Ok(None);
        }
        let mut row: Row = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let value = match item {
                GroupItem::Group(name) => group
                    .iter()
                    .position(|g| g == name)
                    .and_then(|g| key_values[g].clone()),
                GroupItem::Aggregate { function, column } => {
                    let ty = view.columns[i].ty;
                    match (function, column) {
                        (Aggregate::Count, None) => Some(Value::Int64(self.rows)),
                        (Aggregate::Count, Some(_)) => Some(Value::Int64(self.counts[i])),
                        _ if self.counts[i] == 0 => None,
                        (Aggregate::Sum, _) => self.values[i]
                            .as_ref()
                            .map(|v| convert(v, ty))
                            .transpose()?,
                        (Aggregate::Avg, _) => self.values[i]
                            .as_ref()
                            .map(|sum| average(sum, self.counts[i], ty))
                            .transpose()?,
                        (Aggregate::Min | Aggregate::Max, _) => self.values[i].clone(),
                    }
                }
            };
            row.push(value);
        }
        let key = view.entity_key(&row)?;
        let mut entity = view.row_to_entity(key, &row)?;
        entity
            .properties
            .insert(ROWS.into(), Value::Int64(self.rows));
        for (i, item) in items.iter().enumerate() {
            if let GroupItem::Aggregate {
                column: Some(_),
                function,
            } = item
            {
                entity
                    .properties
                    .insert(count_property(i), Value::Int64(self.counts[i]));
                if let (Some(v), true) = (&self.values[i], *function != Aggregate::Count) {
                    entity.properties.insert(sum_property(i), v.clone());
                }
            }
        }
        Ok(Some(entity))
    }
}

fn overflow(what: &str) -> RowError {
    RowError::OutOfRange(format!(
        "{what} out of range in a materialized view's aggregate"
    ))
}

/// `a + sign * b` for the sums of a group.
fn add(a: &Value, b: &Value, sign: i64) -> Result<Value, AggregateError> {
    let mismatch = || AggregateError(format!("cannot add {b} to a sum of {a}"));
    Ok(match (a, b) {
        (Value::Int32(_) | Value::Int64(_), Value::Int32(_) | Value::Int64(_)) => {
            let (a, b) = (
                a.as_i64().ok_or_else(mismatch)?,
                b.as_i64().ok_or_else(mismatch)?,
            );
            Value::Int64(
                b.checked_mul(sign)
                    .and_then(|b| a.checked_add(b))
                    .ok_or_else(|| AggregateError("bigint out of range".into()))?,
            )
        }
        (Value::Double(a), Value::Double(b)) => Value::Double(a + (sign as f64) * b),
        (Value::Decimal(x), Value::Decimal(y)) => {
            let scale = x.scale.max(y.scale);
            let sum = x
                .rescaled(scale)
                .zip(y.rescaled(scale))
                .and_then(|(x, y)| x.checked_add(y.checked_mul(sign.into())?))
                .and_then(|unscaled| Decimal::new(unscaled, scale))
                .ok_or_else(|| AggregateError("numeric sum out of range".into()))?;
            Value::Decimal(sum)
        }
        _ => return Err(mismatch()),
    })
}

/// A sum as a value of the view column's type.
fn convert(sum: &Value, ty: SqlType) -> Result<Value, RowError> {
    Ok(match (sum, ty) {
        (Value::Int32(_) | Value::Int64(_), SqlType::Int8) => {
            Value::Int64(sum.as_i64().unwrap_or(0))
        }
        (Value::Int32(_) | Value::Int64(_), SqlType::Numeric { scale, .. }) => {
            let unscaled = i128::from(sum.as_i64().unwrap_or(0))
                .checked_mul(10i128.pow(scale.into()))
                .ok_or_else(|| overflow("numeric"))?;
            Value::Decimal(Decimal::new(unscaled, scale).ok_or_else(|| overflow("numeric"))?)
        }
        (Value::Decimal(d), SqlType::Numeric { scale, .. }) => Value::Decimal(
            d.rescaled(scale)
                .and_then(|u| Decimal::new(u, scale))
                .ok_or_else(|| overflow("numeric"))?,
        ),
        (Value::Double(v), SqlType::Float8 | SqlType::Float4) => Value::Double(*v),
        (v, _) => v.clone(),
    })
}

/// `sum / count` as a value of the view column's type (decimals truncated
/// at the column's scale).
fn average(sum: &Value, count: i64, ty: SqlType) -> Result<Value, RowError> {
    Ok(match (sum, ty) {
        (Value::Decimal(d), SqlType::Numeric { scale, .. }) => {
            let unscaled =
                d.rescaled(scale).ok_or_else(|| overflow("numeric"))? / i128::from(count);
            Value::Decimal(Decimal::new(unscaled, scale).ok_or_else(|| overflow("numeric"))?)
        }
        (Value::Int32(_) | Value::Int64(_), SqlType::Numeric { scale, .. }) => {
            let unscaled = i128::from(sum.as_i64().unwrap_or(0))
                .checked_mul(10i128.pow(scale.into()))
                .ok_or_else(|| overflow("numeric"))?
                / i128::from(count);
            Value::Decimal(Decimal::new(unscaled, scale).ok_or_else(|| overflow("numeric"))?)
        }
        (Value::Int32(_) | Value::Int64(_), _) => {
            Value::Double(sum.as_i64().unwrap_or(0) as f64 / count as f64)
        }
        (Value::Double(v), _) => Value::Double(v / count as f64),
        (v, _) => v.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Column, Keys};

    fn column(name: &str, ty: SqlType) -> Column {
        Column::new(name, ty)
    }

    fn table(name: &str, columns: Vec<Column>, partition: Vec<usize>, row: Vec<usize>) -> TableDef {
        TableDef::new(name, columns, Keys::Columns { partition, row })
    }

    fn employees() -> TableDef {
        table(
            "employees",
            vec![
                column("dept", SqlType::Int4),
                column("id", SqlType::Int4),
                column("email", SqlType::Text),
                column("salary", SqlType::Int4),
            ],
            vec![0],
            vec![1],
        )
    }

    fn departments() -> TableDef {
        table(
            "departments",
            vec![column("id", SqlType::Int4), column("name", SqlType::Text)],
            vec![0],
            vec![],
        )
    }

    fn employee(dept: i32, id: i32, email: &str, salary: Option<i32>) -> Row {
        vec![
            Some(Value::Int32(dept)),
            Some(Value::Int32(id)),
            Some(Value::String(email.into())),
            salary.map(Value::Int32),
        ]
    }

    fn input<'a>(def: &'a TableDef, row: &'a Row) -> Input<'a> {
        Input {
            base: def,
            row,
            joined: None,
        }
    }

    #[test]
    fn a_copy_is_keyed_and_filtered_as_declared() {
        let base = employees();
        let view = table(
            "by_email",
            vec![column("email", SqlType::Text), column("id", SqlType::Int4)],
            vec![0],
            vec![],
        );
        let m = Maintained {
            table: "employees".into(),
            filter: Some(Predicate::Compare {
                column: Source::Base("salary".into()),
                op: CompareOp::GtEq,
                value: Value::Int32(100),
            }),
            shape: Shape::Rows {
                join: None,
                columns: vec![Source::Base("email".into()), Source::Base("id".into())],
            },
        };
        let ann = employee(1, 7, "ann@x", Some(150));
        let row = m.view_row(&view, &input(&base, &ann)).unwrap().unwrap();
        assert_eq!(row.key.partition_key, "ann@x");
        assert_eq!(row.get("id"), Some(&Value::Int32(7)));
        // Filtered out, and NULL (unknown) filtered out too.
        let low = employee(1, 8, "bob@x", Some(50));
        assert_eq!(m.view_row(&view, &input(&base, &low)).unwrap(), None);
        let unknown = employee(1, 9, "cy@x", None);
        assert_eq!(m.view_row(&view, &input(&base, &unknown)).unwrap(), None);
        // Definitions round-trip through the catalog's JSON.
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Maintained>(&text).unwrap(), m);
    }

    #[test]
    fn a_key_join_reads_the_joined_row_or_drops_the_base_row() {
        let (base, other) = (employees(), departments());
        let view = table(
            "staff",
            vec![
                column("dept", SqlType::Int4),
                column("id", SqlType::Int4),
                column("dept_name", SqlType::Text),
            ],
            vec![0],
            vec![1],
        );
        let mut m = Maintained {
            table: "employees".into(),
            filter: None,
            shape: Shape::Rows {
                join: Some(KeyJoin {
                    table: "departments".into(),
                    on: vec!["dept".into()],
                    outer: false,
                }),
                columns: vec![
                    Source::Base("dept".into()),
                    Source::Base("id".into()),
                    Source::Joined("name".into()),
                ],
            },
        };
        let ann = employee(1, 7, "ann@x", None);
        let sales = vec![Some(Value::Int32(1)), Some(Value::String("Sales".into()))];
        let with = |joined| Input {
            base: &base,
            row: &ann,
            joined: Some((&other, joined)),
        };
        let row = m.view_row(&view, &with(Some(&sales))).unwrap().unwrap();
        assert_eq!(row.get("dept_name"), Some(&Value::String("Sales".into())));
        assert_eq!(m.view_row(&view, &with(None)).unwrap(), None);
        if let Shape::Rows {
            join: Some(join), ..
        } = &mut m.shape
        {
            join.outer = true;
        }
        let row = m.view_row(&view, &with(None)).unwrap().unwrap();
        assert_eq!(row.get("dept_name"), None);
    }

    fn group_view() -> (TableDef, Vec<GroupItem>) {
        let view = table(
            "by_dept",
            vec![
                column("dept", SqlType::Int4),
                column("n", SqlType::Int8),
                column("total", SqlType::Int8),
                column("low", SqlType::Int4),
                column("high", SqlType::Int4),
                column("mean", SqlType::Float8),
            ],
            vec![0],
            vec![],
        );
        let agg = |function, column: &str| GroupItem::Aggregate {
            function,
            column: Some(column.into()),
        };
        let items = vec![
            GroupItem::Group("dept".into()),
            GroupItem::Aggregate {
                function: Aggregate::Count,
                column: None,
            },
            agg(Aggregate::Sum, "salary"),
            agg(Aggregate::Min, "salary"),
            agg(Aggregate::Max, "salary"),
            agg(Aggregate::Avg, "salary"),
        ];
        (view, items)
    }

    #[test]
    fn groups_add_and_remove_rows() {
        let base = employees();
        let (view, items) = group_view();
        let group = vec!["dept".to_owned()];
        let key = vec![Some(Value::Int32(1))];
        let rows = [
            employee(1, 1, "a", Some(10)),
            employee(1, 2, "b", Some(30)),
            employee(1, 3, "c", None),
        ];
        let mut state = GroupState::empty(items.len());
        for row in &rows {
            state.fold(&items, &input(&base, row), 1).unwrap().unwrap();
        }
        let entity = state.entity(&view, &items, &group, &key).unwrap().unwrap();
        let get = |e: &Entity, name: &str| e.get(name).cloned();
        assert_eq!(get(&entity, "n"), Some(Value::Int64(3)));
        assert_eq!(get(&entity, "total"), Some(Value::Int64(40)));
        assert_eq!(get(&entity, "low"), Some(Value::Int32(10)));
        assert_eq!(get(&entity, "high"), Some(Value::Int32(30)));
        assert_eq!(get(&entity, "mean"), Some(Value::Double(20.0)));
        // The state survives a trip through the entity.
        let mut state = GroupState::of_entity(&view, &entity);
        // Taking away a row that is not an extreme is undone in place.
        state
            .fold(&items, &input(&base, &rows[2]), -1)
            .unwrap()
            .unwrap();
        let entity = state.entity(&view, &items, &group, &key).unwrap().unwrap();
        assert_eq!(get(&entity, "n"), Some(Value::Int64(2)));
        // Taking away the minimum needs the group's other rows.
        assert_eq!(
            state.fold(&items, &input(&base, &rows[0]), -1).unwrap(),
            Err(NeedsRecompute)
        );
        // The last row gone, the group goes.
        let mut state = GroupState::empty(items.len());
        state
            .fold(&items, &input(&base, &rows[0]), 1)
            .unwrap()
            .unwrap();
        state
            .fold(&items, &input(&base, &rows[0]), -1)
            .unwrap()
            .unwrap();
        assert_eq!(state.entity(&view, &items, &group, &key).unwrap(), None);
    }

    #[test]
    fn decimal_averages_truncate_at_the_column_scale() {
        let sum = Value::Decimal(Decimal::new(1000, 2).unwrap()); // 10.00
        let ty = SqlType::Numeric {
            precision: 38,
            scale: 6,
        };
        assert_eq!(
            average(&sum, 3, ty).unwrap(),
            Value::Decimal(Decimal::new(3_333_333, 6).unwrap())
        );
    }
}
