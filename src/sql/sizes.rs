//! The sizes psql's `\dt+`, `\di+`, `\l+`, `\db+` and monitoring queries ask for:
//! `pg_table_size`, `pg_relation_size`, `pg_total_relation_size`,
//! `pg_indexes_size`, `pg_database_size`, `pg_tablespace_size` and
//! `pg_size_pretty`.
//!
//! A relation's size is the bytes its store table's entities take in the
//! Azure Table service's size formula (`TableStats::bytes`), the figure the
//! service bills and the diagnostics report: a table's rows, an index's
//! entries. A primary key is the rows' own key and has no entries of its
//! own (0 bytes), as a view holds none. An object id that names no
//! relation gives NULL, and a name that names none is 42P01, as in
//! PostgreSQL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::prelude::SessionContext;

use super::functions::{int, relation_name};
use super::pg_catalog::{indexes_of, table_oid};
use crate::catalog::{Catalog, TableDef};

/// Which bytes of a relation a function counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Counted {
    /// `pg_relation_size`, `pg_table_size`: the relation's own.
    Own,
    /// `pg_indexes_size`: its indexes'.
    Indexes,
    /// `pg_total_relation_size`: both.
    Total,
    /// `pg_database_size`, `pg_tablespace_size`: every relation's.
    Database,
}

/// One of the size functions, reading the store's figures.
struct Size {
    name: &'static str,
    counted: Counted,
    signature: Signature,
    catalog: Arc<Catalog>,
}

impl std::fmt::Debug for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Size {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Size {}

impl std::hash::Hash for Size {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for Size {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        exec_err!("{} runs only as an asynchronous function", self.name)
    }
}

#[async_trait::async_trait]
impl AsyncScalarUDFImpl for Size {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let Some(relations) = args.args.first() else {
            return exec_err!("{} takes a relation", self.name);
        };
        let relations = relations.to_array(args.number_rows)?;
        let mut sizes = Vec::with_capacity(relations.len());
        for i in 0..relations.len() {
            let relation = ScalarValue::try_from_array(&relations, i)?;
            sizes.push(match relation.is_null() {
                true => None,
                false => self.size(&relation).await?,
            });
        }
        Ok(ColumnarValue::Array(Arc::new(Int64Array::from(sizes))))
    }
}

impl Size {
    /// The bytes counted for a relation (an object id, or a name), or the
    /// database; `None` for an object id that names no relation.
    async fn size(&self, relation: &ScalarValue) -> DfResult<Option<i64>> {
        let tables = self.catalog.list();
        if self.counted == Counted::Database {
            let mut total = 0;
            for def in &tables {
                total += self.own_bytes(def).await? + self.index_bytes(def).await?;
            }
            return Ok(Some(total));
        }
        let name = relation.try_as_str().flatten();
        let oid = match name {
            Some(name) => name.parse::<i64>().ok(),
            None => int(relation),
        };
        // Whether the argument names the relation of this oid and name.
        let names = |relation_oid: i32, relation: &str| match (oid, name) {
            (Some(oid), _) => i64::from(relation_oid) == oid,
            (None, Some(name)) => relation_name(name) == relation,
            (None, None) => false,
        };
        if let Some(def) = tables.iter().find(|d| names(table_oid(&d.name), &d.name)) {
            let own = self.own_bytes(def).await?;
            return Ok(Some(match self.counted {
                Counted::Own => own,
                Counted::Indexes => self.index_bytes(def).await?,
                Counted::Total | Counted::Database => own + self.index_bytes(def).await?,
            }));
        }
        for def in &tables {
            for index in indexes_of(def) {
                if !names(index.oid, &index.name) {
                    continue;
                }
                let stored = def.indexes.iter().find(|i| i.name == index.name);
                let bytes = match (stored, self.counted) {
                    (Some(stored), Counted::Own | Counted::Total) => {
                        self.store_bytes(&stored.store_table()).await?
                    }
                    _ => 0,
                };
                return Ok(Some(bytes));
            }
        }
        match (oid, name) {
            (None, Some(name)) => Err(crate::sql::SqlError::from(
                crate::catalog::CatalogError::TableNotFound(relation_name(name).to_owned()),
            )
            .into()),
            _ => Ok(None),
        }
    }

    /// The bytes of a table's (or materialized view's) rows; none for a view.
    async fn own_bytes(&self, def: &TableDef) -> DfResult<i64> {
        match def.holds_rows() {
            true => self.store_bytes(&def.name).await,
            false => Ok(0),
        }
    }

    /// The bytes of a table's index entries.
    async fn index_bytes(&self, def: &TableDef) -> DfResult<i64> {
        let mut total = 0;
        for index in &def.indexes {
            total += self.store_bytes(&index.store_table()).await?;
        }
        Ok(total)
    }

    async fn store_bytes(&self, store_table: &str) -> DfResult<i64> {
        let stats = self
            .catalog
            .store()
            .table_stats(store_table)
            .await
            .map_err(|e| crate::sql::SqlError::from(crate::catalog::CatalogError::from(e)))?;
        Ok(i64::try_from(stats.bytes).unwrap_or(i64::MAX))
    }
}

/// `pg_size_pretty(bytes)`: PostgreSQL 15's text for a size: bytes under
/// 10 kB, then kB, MB, GB, TB and PB, each unit used below 20,480 of it
/// (each figure rounded half away from zero).
pub fn pretty(bytes: i64) -> String {
    // Name, limit, whether rounded by half, bits of the unit.
    const UNITS: [(&str, i64, bool, u32); 6] = [
        ("bytes", 10 * 1024, false, 0),
        ("kB", 20 * 1024 - 1, true, 10),
        ("MB", 20 * 1024 - 1, true, 20),
        ("GB", 20 * 1024 - 1, true, 30),
        ("TB", 20 * 1024 - 1, true, 40),
        ("PB", 20 * 1024 - 1, true, 50),
    ];
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    let mut size = bytes;
    for (i, &(name, limit, round, unit_bits)) in UNITS.iter().enumerate() {
        let next = UNITS.get(i + 1);
        if next.is_none() || size.unsigned_abs() < limit as u64 {
            let size = if round { half_rounded(size) } else { size };
            return format!("{size} {name}");
        }
        let (_, _, next_round, next_bits) = next.copied().expect("a next unit");
        let bits = next_bits - unit_bits - u32::from(next_round) + u32::from(round);
        size /= 1_i64 << bits;
    }
    unreachable!("the last unit is always used")
}

/// Registers the size functions on a session's context.
pub fn register(ctx: &SessionContext, catalog: &Arc<Catalog>) {
    let functions = [
        ("pg_relation_size", Counted::Own, 2),
        ("pg_table_size", Counted::Own, 1),
        ("pg_indexes_size", Counted::Indexes, 1),
        ("pg_total_relation_size", Counted::Total, 1),
        ("pg_database_size", Counted::Database, 1),
        // Every relation is in the default tablespace.
        ("pg_tablespace_size", Counted::Database, 1),
    ];
    for (name, counted, most_args) in functions {
        let arities = (1..=most_args).map(TypeSignature::Any).collect();
        let size = Size {
            name,
            counted,
            signature: Signature::one_of(arities, Volatility::Volatile),
            catalog: catalog.clone(),
        };
        ctx.register_udf(AsyncScalarUDF::new(Arc::new(size)).into_scalar_udf());
    }
    super::functions::register(
        ctx,
        "pg_size_pretty",
        &[1],
        DataType::Utf8,
        Volatility::Immutable,
        |args| Ok(ScalarValue::Utf8(int(&args[0]).map(pretty))),
    );
}

#[cfg(test)]
mod tests {
    use super::pretty;

    #[test]
    fn sizes_print_as_postgresql_prints_them() {
        // Each figure from PostgreSQL 15's pg_size_pretty.
        let cases = [
            (0, "0 bytes"),
            (10_239, "10239 bytes"),
            (10_240, "10 kB"),
            (10_752, "11 kB"),
            (11_263, "11 kB"),
            (1_048_575, "1024 kB"),
            (20_479 * 1024, "20 MB"),
            (20_480 * 1024, "20 MB"),
            (1_536 * 1024 * 1024, "1536 MB"),
            (-10_240, "-10 kB"),
            (i64::MAX, "8192 PB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(pretty(bytes), text, "{bytes}");
        }
    }
}
