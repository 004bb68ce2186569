//! Point queries without a planning round trip.
//!
//! A prepared `SELECT <columns> FROM t WHERE <every key column> = <parameter
//! or constant>` is recognised once, when it is prepared, from its optimized
//! plan. Each execution then encodes the key from the parameters and makes one
//! point get: no DataFusion optimizer or physical planner per query. Anything
//! else (or a parameter that does not fit its column) takes the general path.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator};

use std::time::{Instant, SystemTime};

use super::convert::entities_to_batch;
use super::diagnostics::queries::{QueryRecord, ScanRecord};
use super::diagnostics::Monitor;
use super::error::Result;
use super::pushdown::literal_value;
use super::pushdown::AccessPath;
use super::session::Output;
use crate::catalog::{Catalog, Keys, Row, TableDef};
use crate::store::EntityRead;

/// Where a key column's value comes from.
#[derive(Debug, Clone)]
enum Source {
    /// The parameter at this position (0 for `$1`).
    Param(usize),
    Constant(ScalarValue),
}

/// A prepared point query.
#[derive(Debug)]
pub struct PointPlan {
    table: Arc<TableDef>,
    keys: Vec<(usize, Source)>,
    /// The table column of each output column.
    outputs: Vec<usize>,
    /// Properties to decode.
    projection: Option<Vec<String>>,
    schema: SchemaRef,
}

fn column_index(def: &TableDef, expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Column(c) => def.column_index(&c.name),
        Expr::Alias(a) => column_index(def, &a.expr),
        _ => None,
    }
}

fn source(expr: &Expr) -> Option<Source> {
    match expr {
        Expr::Placeholder(p) => Some(Source::Param(
            p.id.strip_prefix('$')?
                .parse::<usize>()
                .ok()?
                .checked_sub(1)?,
        )),
        Expr::Literal(v, _) => Some(Source::Constant(v.clone())),
        _ => None,
    }
}

impl PointPlan {
    /// Recognises a point query in an optimized plan.
    pub fn detect(plan: &LogicalPlan, catalog: &Catalog) -> Option<PointPlan> {
        // Projection? -> Filter? -> TableScan: a filter with parameters stays
        // above the scan until the parameters are known.
        let (outputs_expr, below) = match plan {
            LogicalPlan::Projection(p) => (Some(&p.expr), p.input.as_ref()),
            other => (None, other),
        };
        let (filter, below) = match below {
            LogicalPlan::Filter(f) => (Some(&f.predicate), f.input.as_ref()),
            other => (None, other),
        };
        let LogicalPlan::TableScan(scan) = below else {
            return None;
        };
        if scan.fetch.is_some() {
            return None;
        }
        let def = catalog.get(scan.table_name.table())?;
        let Keys::Columns { partition, row } = &def.keys else {
            return None;
        };
        let key_columns: Vec<usize> = partition.iter().chain(row).copied().collect();

        let mut keys: Vec<(usize, Source)> = Vec::new();
        for filter in scan
            .filters
            .iter()
            .chain(filter)
            .flat_map(split_conjunction)
        {
            let Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) = filter
            else {
                return None;
            };
            let (column, value) = match (
                column_index(&def, left.as_ref()),
                source(right.as_ref()),
                column_index(&def, right.as_ref()),
                source(left.as_ref()),
            ) {
                (Some(c), Some(s), _, _) | (_, _, Some(c), Some(s)) => (c, s),
                _ => return None,
            };
            if !key_columns.contains(&column) || keys.iter().any(|(c, _)| *c == column) {
                return None;
            }
            keys.push((column, value));
        }
        if keys.len() != key_columns.len() {
            return None;
        }

        let scanned: Vec<usize> = match &scan.projection {
            Some(p) => p.clone(),
            None => (0..def.columns.len()).collect(),
        };
        let outputs: Vec<usize> = match outputs_expr {
            Some(exprs) => exprs
                .iter()
                .map(|e| column_index(&def, e))
                .collect::<Option<_>>()?,
            None => scanned.clone(),
        };
        if outputs.iter().any(|&i| i >= def.columns.len()) {
            return None;
        }
        let projection = def.store_projection(outputs.iter().copied());
        let schema = Arc::new(plan.schema().as_arrow().clone());
        Some(PointPlan {
            table: def,
            keys,
            outputs,
            projection,
            schema,
        })
    }

    /// Runs the query, or returns `None` when the general path must (a
    /// parameter that does not convert, or a table changed since preparing).
    pub async fn execute(
        &self,
        current: Option<Arc<TableDef>>,
        view: Arc<dyn EntityRead>,
        params: &ParamValues,
        monitor: &Monitor,
        text: &Arc<str>,
    ) -> Result<Option<Output>> {
        let def = &self.table;
        match current {
            Some(current) if Arc::ptr_eq(&current, def) => {}
            _ => return Ok(None),
        }
        let ParamValues::List(values) = params else {
            return Ok(None);
        };
        let mut row: Row = vec![None; def.columns.len()];
        for (column, source) in &self.keys {
            let scalar = match source {
                Source::Param(i) => match values.get(*i) {
                    Some(v) => &v.value,
                    None => return Ok(None),
                },
                Source::Constant(v) => v,
            };
            if scalar.is_null() {
                return Ok(Some(self.rows(&[])?));
            }
            match literal_value(def.columns[*column].ty, scalar) {
                Some(v) => row[*column] = Some(v),
                None => return Ok(None),
            }
        }
        // A value no key can hold matches no row.
        let Ok(key) = def.entity_key(&row) else {
            return Ok(Some(self.rows(&[])?));
        };
        let started = (SystemTime::now(), Instant::now());
        let entity = view
            .get(&def.name, &key, self.projection.as_deref())
            .await?;
        let found = u64::from(entity.is_some());
        monitor
            .traffic
            .record_reads(&def.name, [(key.partition_key.as_str(), found)]);
        monitor.record_statement(QueryRecord {
            id: 0,
            started: started.0,
            text: text.clone(),
            elapsed: started.1.elapsed(),
            rows: found,
            scans: vec![ScanRecord {
                table: def.name.clone(),
                access: AccessPath::Points(vec![key]).to_string(),
                across_partitions: false,
                entities_read: found,
                rows_returned: found,
                filter_columns: Vec::new(),
                reverse: false,
                joined: false,
                aggregated: false,
            }],
        });
        Ok(Some(self.rows(entity.as_slice())?))
    }

    pub fn table_name(&self) -> &str {
        &self.table.name
    }

    fn rows(&self, entities: &[crate::model::Entity]) -> Result<Output> {
        let batch = entities_to_batch(&self.table, &self.outputs, self.schema.clone(), entities)?;
        Output::from_batches(self.schema.clone(), vec![batch], "SELECT")
    }
}
