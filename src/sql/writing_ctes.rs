//! Statements whose WITH holds INSERT, UPDATE, DELETE or MERGE
//! (data-modifying CTEs): `WITH moved AS (DELETE FROM t WHERE ... RETURNING
//! *) INSERT INTO archive SELECT * FROM moved`.
//!
//! The writing parts run first, in their order, then the statement's last
//! part, all inside one transaction: the open block, or the statement's own,
//! committed when the statement ends (so a failure anywhere leaves nothing
//! written). Each writing part's RETURNING rows are kept as a table of the
//! statement, which the part's name reads from then on; the parts that
//! only read stay in the WITH of every later part. As in PostgreSQL, each
//! writing part runs once and whole, whether anything reads it or not.
//!
//! One difference: PostgreSQL runs every part on the same snapshot, so a
//! part does not see what another wrote to a table (only its RETURNING
//! rows); here a later part reads the tables as the earlier parts left
//! them.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::common::ParamValues;
use datafusion::datasource::MemTable;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{Cte, Query, SetExpr, Statement, With};
use futures::TryStreamExt;

use super::dml;
use super::error::{Result, SqlError};
use super::names::ColumnNames;
use super::session::{Output, Session};

/// The schema the kept RETURNING rows are tables of, for one statement.
pub const SCHEMA: &str = "__statement";

/// The INSERT, UPDATE, DELETE or MERGE a `WITH ...` statement ends in.
pub fn dml_body(query: &Query) -> Option<&Statement> {
    match query.body.as_ref() {
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) | SetExpr::Merge(s) => Some(s),
        _ => None,
    }
}

/// Whether a part of the query's WITH writes.
pub fn has_writing_ctes(query: &Query) -> bool {
    query.with.as_ref().is_some_and(|with| {
        with.cte_tables
            .iter()
            .any(|cte| dml_body(&cte.query).is_some())
    })
}

/// The RETURNING rows of a statement's writing parts, as tables.
#[derive(Debug, Default)]
pub struct StatementTables {
    tables: Arc<MemorySchemaProvider>,
}

impl StatementTables {
    pub fn schema(&self) -> Arc<dyn SchemaProvider> {
        self.tables.clone()
    }

    /// Keeps rows as a table of the statement; returns the query that reads them.
    fn keep(
        &self,
        schema: SchemaRef,
        batches: Vec<datafusion::arrow::array::RecordBatch>,
    ) -> Result<Query> {
        let name = format!("part{}", self.tables.table_names().len() + 1);
        let table = MemTable::try_new(schema, vec![batches])?;
        self.tables.register_table(name.clone(), Arc::new(table))?;
        let sql = format!("SELECT * FROM \"{SCHEMA}\".\"{name}\"");
        match Session::parse(&sql)?.pop() {
            Some(DfStatement::Statement(s)) => match *s {
                Statement::Query(query) => Ok(*query),
                _ => Err(SqlError::Internal(format!("not a query: {sql}"))),
            },
            _ => Err(SqlError::Internal(format!("not a query: {sql}"))),
        }
    }

    fn clear(&self) {
        for name in self.tables.table_names() {
            let _ = self.tables.deregister_table(&name);
        }
    }
}

/// `query` (a part, or the statement's last part) under the parts that
/// precede it, as a statement of its own.
fn under(recursive: bool, parts: &[Cte], mut query: Query) -> Statement {
    let mut ctes = parts.to_vec();
    ctes.extend(query.with.take().map(|w| w.cte_tables).unwrap_or_default());
    if !ctes.is_empty() {
        query.with = Some(with_of(recursive, ctes));
    } else if let Some(body) = dml_body(&query) {
        return body.clone();
    }
    Statement::Query(Box::new(query))
}

fn with_of(recursive: bool, cte_tables: Vec<Cte>) -> With {
    With {
        with_token: AttachedToken::empty(),
        recursive,
        cte_tables,
    }
}

/// A writing part's name, reading `query` (the kept rows) instead.
fn reading(cte: Cte, query: Query) -> Cte {
    Cte {
        query: Box::new(query),
        ..cte
    }
}

impl Session {
    /// Runs a statement whose WITH writes (see the module's comment).
    pub(super) async fn run_writing_ctes(
        &mut self,
        query: Query,
        params: Option<ParamValues>,
        names: Option<ColumnNames>,
    ) -> Result<Output> {
        let implicit = self.open_implicit();
        let mut result = self.run_parts(query, params, names).await;
        if implicit {
            // The rows are read before the statement's own transaction
            // commits: an error while reading them leaves nothing written.
            if let Ok(output) = result {
                result = collected(output).await;
            }
            let committed = self.close_implicit(result.is_ok()).await;
            result = committed.and(result);
        }
        self.statement_tables.clear();
        result
    }

    async fn run_parts(
        &mut self,
        query: Query,
        params: Option<ParamValues>,
        names: Option<ColumnNames>,
    ) -> Result<Output> {
        let statement = self.after_parts(query, Parts::Run(&params)).await?;
        self.refresh_view();
        match dml::is_dml(&statement) {
            true => self.run_dml(&statement, None, params).await,
            false => {
                let statement = DfStatement::Statement(Box::new(statement));
                self.run_query(statement, params, names).await
            }
        }
    }

    /// The parameter types and result columns of a statement whose WITH
    /// writes, for Describe: each writing part's RETURNING columns stand
    /// in for its rows, with no row written.
    pub(super) async fn describe_writing_ctes(
        &mut self,
        query: &Query,
    ) -> Result<(Vec<Option<DataType>>, Option<SchemaRef>)> {
        let result = self.describe_parts(query.clone()).await;
        self.statement_tables.clear();
        result
    }

    async fn describe_parts(
        &mut self,
        query: Query,
    ) -> Result<(Vec<Option<DataType>>, Option<SchemaRef>)> {
        let mut types = Vec::new();
        let statement = self.after_parts(query, Parts::Describe(&mut types)).await?;
        let result = match dml::is_dml(&statement) {
            true => {
                let (found, result) = dml::describe(self, &statement).await?;
                learn(&mut types, found);
                result
            }
            false => {
                let plan = self
                    .to_plan(DfStatement::Statement(Box::new(statement)))
                    .await?;
                learn(&mut types, super::parameters::types(&plan)?);
                Some(Arc::new(plan.schema().as_arrow().clone()))
            }
        };
        Ok((types, result))
    }

    /// Runs (or describes) the writing parts of the query's WITH in their
    /// order, and returns its last part under the parts that read.
    async fn after_parts(&mut self, mut query: Query, mut how: Parts<'_>) -> Result<Statement> {
        let with = query.with.take().unwrap_or_else(|| with_of(false, vec![]));
        let mut parts: Vec<Cte> = Vec::new();
        for cte in with.cte_tables {
            if dml_body(&cte.query).is_none() {
                parts.push(cte);
                continue;
            }
            let statement = under(with.recursive, &parts, (*cte.query).clone());
            let returned = match &mut how {
                Parts::Run(params) => {
                    self.refresh_view();
                    match self.run_dml(&statement, None, (*params).clone()).await? {
                        Output::Rows { schema, stream, .. } => {
                            Some((schema, stream.try_collect().await?))
                        }
                        _ => None,
                    }
                }
                Parts::Describe(types) => {
                    let (found, result) = dml::describe(self, &statement).await?;
                    learn(types, found);
                    result.map(|schema| (schema, vec![]))
                }
            };
            // Without RETURNING there is nothing to read.
            if let Some((schema, batches)) = returned {
                let kept = self.statement_tables.keep(schema, batches)?;
                parts.push(reading(cte, kept));
            }
        }
        Ok(under(with.recursive, &parts, query))
    }
}

/// What [`Session::after_parts`] does with each writing part: runs it with
/// the statement's parameters, or learns its parameters' types.
enum Parts<'a> {
    Run(&'a Option<ParamValues>),
    Describe(&'a mut Vec<Option<DataType>>),
}

/// Adds the parameter types a part found to those known (the first type
/// found for a parameter is its type).
fn learn(types: &mut Vec<Option<DataType>>, found: Vec<Option<DataType>>) {
    if types.len() < found.len() {
        types.resize(found.len(), None);
    }
    for (known, found) in types.iter_mut().zip(found) {
        if known.is_none() {
            *known = found;
        }
    }
}

/// The output with its rows read into memory.
async fn collected(output: Output) -> Result<Output> {
    match output {
        Output::Rows {
            schema,
            stream,
            tag,
        } => {
            let batches: Vec<_> = stream.try_collect().await?;
            Output::from_batches(schema, batches, &tag)
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> Query {
        match Session::parse(sql).unwrap().pop() {
            Some(DfStatement::Statement(s)) => match *s {
                Statement::Query(q) => *q,
                other => panic!("not a query: {other}"),
            },
            _ => panic!("no statement"),
        }
    }

    #[test]
    fn a_with_that_writes_is_told_from_one_that_reads() {
        let writes = query("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d");
        assert!(has_writing_ctes(&writes));
        assert!(dml_body(&writes).is_none());
        let reads = query("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x");
        assert!(!has_writing_ctes(&reads));
        assert!(matches!(dml_body(&reads), Some(Statement::Insert(_))));
    }

    #[test]
    fn a_part_runs_under_the_parts_before_it() {
        let q = query("WITH a AS (SELECT 1 AS x), d AS (DELETE FROM t WHERE id IN (SELECT x FROM a) RETURNING id) SELECT * FROM d");
        let with = q.with.clone().unwrap();
        let part = (*with.cte_tables[1].query).clone();
        assert_eq!(
            under(false, &with.cte_tables[..1], part.clone()).to_string(),
            "WITH a AS (SELECT 1 AS x) DELETE FROM t WHERE id IN (SELECT x FROM a) RETURNING id"
        );
        assert!(matches!(under(false, &[], part), Statement::Delete(_)));
        let main = query("WITH b AS (SELECT 2) SELECT * FROM b ORDER BY 1 LIMIT 1");
        assert_eq!(
            under(true, &with.cte_tables[..1], main).to_string(),
            "WITH RECURSIVE a AS (SELECT 1 AS x), b AS (SELECT 2) SELECT * FROM b ORDER BY 1 LIMIT 1"
        );
    }
}
