//! CREATE TABLE (and AS SELECT), DROP TABLE, TRUNCATE, ALTER TABLE (ADD
//! COLUMN, ADD PRIMARY KEY, ADD FOREIGN KEY, ALTER COLUMN SET/DROP
//! DEFAULT, OWNER TO), and sequences: CREATE/DROP SEQUENCE, ALTER SEQUENCE
//! OWNED BY, `serial` columns.
//!
//! Key mapping (the compound key pattern): `PRIMARY KEY (a, b, c)` stores `a`
//! as the PartitionKey and `(b, c)` as the RowKey. `WITH (partition_key =
//! 'a, b')` names the partition columns instead; the other primary key
//! columns form the RowKey. A table whose columns include `"PartitionKey"`
//! and `"RowKey"` (and optionally `"Timestamp"` and `"ETag"`) exposes the
//! entities' system fields directly. A table without a primary key gets
//! generated keys spread over partitions.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, CascadeOption, CheckConstraint,
    ColumnDef, ColumnOption, CommentObject, CreateIndex, CreateTable, CreateTableOptions,
    DeferrableInitial, Expr as AstExpr, ForeignKeyConstraint, GeneratedAs, ObjectName,
    ReferentialAction, RenameTableNameKind, SqlOption, TableConstraint, Truncate, UniqueConstraint,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use futures::TryStreamExt;

use super::convert::batch_to_rows;
use super::error::{Result, SqlError};
use super::pg_catalog::indexes_of;
use super::precision::MAX_DIGITS;
use super::session::{normalize, table_name, Output, Session};
use super::txn::Change;
use super::types::{arrow_type, declared_type};
use crate::catalog::{
    check_definition, CatalogError, Check, Column, EnumTypes, ForeignKey, Identity, IndexDef, Keys,
    RefAction, SequenceDef, SqlType, SystemField, TableDef,
};
use crate::model::Value;
use crate::store::{Query, StoreError};

/// The integer type of a `serial`, `bigserial` or `smallserial` column.
fn serial_type(def: &ColumnDef) -> Option<SqlType> {
    let datafusion::sql::sqlparser::ast::DataType::Custom(name, _) = &def.data_type else {
        return None;
    };
    match name.to_string().to_ascii_lowercase().as_str() {
        "serial" | "serial4" => Some(SqlType::Int4),
        "bigserial" | "serial8" => Some(SqlType::Int8),
        "smallserial" | "serial2" => Some(SqlType::Int2),
        _ => None,
    }
}

/// The sequence a `serial` or identity column draws from, named as
/// PostgreSQL names it.
fn serial_sequence(table: &str, column: &Column) -> SequenceDef {
    let mut def = SequenceDef::new(&format!("{table}_{}_seq", column.name), column.ty);
    def.owned_by = Some((table.to_owned(), column.name.clone()));
    def
}

/// The default of a column that draws from a sequence.
fn nextval_default(sequence: &str) -> String {
    format!("nextval('{}'::regclass)", sequence.replace('\'', "''"))
}

/// A column definition: the column and the constraints it declares.
struct ColumnDefinition {
    column: Column,
    primary: bool,
    references: Option<ForeignKeyConstraint>,
    unique: Option<UniqueConstraint>,
    checks: Vec<CheckConstraint>,
}

fn column_of(def: &ColumnDef, types: &EnumTypes) -> Result<ColumnDefinition> {
    let name = normalize(&def.name);
    let (ty, enum_type) = match serial_type(def) {
        Some(ty) => (ty, None),
        None => super::enums::column_type(types, &def.data_type)?,
    };
    let mut column = Column::new(name.clone(), ty);
    column.enum_type = enum_type;
    column.precision = super::precision::declared_digits(&def.data_type);
    let mut primary = false;
    let mut references = None;
    let mut unique = None;
    let mut checks = Vec::new();
    for option in &def.options {
        match &option.option {
            ColumnOption::Check(check) => {
                let mut check = check.clone();
                check.name = check.name.or_else(|| option.name.clone());
                checks.push(check);
            }
            ColumnOption::NotNull => column.nullable = false,
            ColumnOption::Null => {}
            ColumnOption::PrimaryKey(_) => primary = true,
            ColumnOption::Unique(constraint) => {
                let mut constraint = constraint.clone();
                constraint.name = constraint.name.or_else(|| option.name.clone());
                constraint.columns = vec![def.name.clone().into()];
                unique = Some(constraint);
            }
            ColumnOption::ForeignKey(fk) => {
                let mut fk = fk.clone();
                fk.name = fk.name.or_else(|| option.name.clone());
                fk.columns = vec![def.name.clone()];
                references = Some(fk);
            }
            ColumnOption::Default(expr) => column.default = Some(expr.to_string()),
            // A column a sequence numbers, as `serial` (its options, and
            // generated expressions, are refused below).
            ColumnOption::Generated {
                generated_as: generated @ (GeneratedAs::Always | GeneratedAs::ByDefault),
                sequence_options,
                generation_expr: None,
                ..
            } if matches!(ty, SqlType::Int2 | SqlType::Int4 | SqlType::Int8)
                && sequence_options.as_ref().is_none_or(Vec::is_empty) =>
            {
                column.identity = Some(match generated {
                    GeneratedAs::Always => Identity::Always,
                    _ => Identity::ByDefault,
                });
            }
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "column option {other} of column {name:?} is not supported"
                )))
            }
        }
    }
    column.system = match name.as_str() {
        "Timestamp" if matches!(ty, SqlType::Timestamptz | SqlType::Timestamp) => {
            Some(SystemField::Timestamp)
        }
        "ETag" if matches!(ty, SqlType::Text | SqlType::Varchar(_)) => Some(SystemField::ETag),
        "Properties" if matches!(ty, SqlType::Json | SqlType::Jsonb) => {
            Some(SystemField::Properties)
        }
        "Timestamp" | "ETag" => {
            return Err(SqlError::InvalidDefinition(format!(
                "column {name:?} shows the entity's {name} and must be of type {}",
                if name == "ETag" {
                    "text"
                } else {
                    "timestamp with time zone"
                }
            )))
        }
        _ => None,
    };
    Ok(ColumnDefinition {
        column,
        primary,
        references,
        unique,
        checks,
    })
}

/// A CHECK constraint of `def`: named as given, or as PostgreSQL names
/// one (`t_c_check` when its condition reads one column `c`, else
/// `t_check`; numbered from 1 when the name is taken).
fn check_of(def: &TableDef, check: &CheckConstraint) -> Result<Check> {
    if check.enforced == Some(false) {
        return Err(SqlError::FeatureNotSupported(
            "CHECK constraints NOT ENFORCED are not supported".into(),
        ));
    }
    let taken = |name: &str| {
        def.checks.iter().any(|c| c.name == name)
            || def.foreign_keys.iter().any(|f| f.name == name)
            || indexes_of(def).iter().any(|i| i.name == name)
    };
    let name = match &check.name {
        Some(name) => {
            let name = normalize(name);
            if taken(&name) {
                return Err(SqlError::value(
                    "42710",
                    format!(
                        "constraint \"{name}\" for relation \"{}\" already exists",
                        def.name
                    ),
                ));
            }
            name
        }
        None => {
            let read = columns_read(def, &check.expr);
            let stem = match read.len() {
                1 => format!("{}_{}", def.name, read.first().expect("one column")),
                _ => def.name.clone(),
            };
            let mut name = format!("{stem}_check");
            let mut n = 0;
            while taken(&name) {
                n += 1;
                name = format!("{stem}_check{n}");
            }
            name
        }
    };
    Ok(Check {
        name,
        expr: check.expr.to_string(),
    })
}

/// The columns of `def` an expression reads.
fn columns_read(def: &TableDef, expr: &AstExpr) -> BTreeSet<String> {
    let mut read = BTreeSet::new();
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        let column = match e {
            AstExpr::Identifier(ident) => Some(ident),
            AstExpr::CompoundIdentifier(parts) => parts.last(),
            _ => None,
        };
        if let Some(column) = column.map(normalize) {
            if def.column_index(&column).is_some() {
                read.insert(column);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    read
}

/// Adds CHECK constraints to `def`, each condition planned over its
/// columns (a column it does not have is 42703).
fn add_checks<'a>(
    session: &Session,
    def: &mut TableDef,
    checks: impl IntoIterator<Item = &'a CheckConstraint>,
) -> Result<()> {
    for check in checks {
        let check = check_of(def, check)?;
        def.checks.push(check);
    }
    super::checks::Checks::of(session, &Arc::new(def.clone()))?;
    Ok(())
}

/// The unique index that keeps a UNIQUE constraint of `table`: named as
/// the constraint, or as PostgreSQL names one (`t_a_b_key`). NULLs are
/// distinct (rows with a NULL are not indexed); NULLS NOT DISTINCT is
/// refused, and so is a name another relation has (42P07).
fn unique_index(session: &Session, table: &str, unique: &UniqueConstraint) -> Result<IndexDef> {
    use datafusion::sql::sqlparser::ast::NullsDistinctOption;
    if matches!(unique.nulls_distinct, NullsDistinctOption::NotDistinct) {
        return Err(SqlError::FeatureNotSupported(
            "UNIQUE NULLS NOT DISTINCT is not supported (rows with a NULL are not checked)".into(),
        ));
    }
    let columns = column_names(&unique.columns, "unique constraint")?;
    let name = match &unique.name {
        Some(name) => normalize(name),
        None => format!("{table}_{}_key", columns.join("_")),
    };
    exists(session, name_taken(session, &name), false, &name)?;
    Ok(IndexDef {
        stored_as: free_index_storage(session, &name),
        name,
        columns,
        unique: true,
        intra_partition: false,
        building: false,
        constraint: true,
    })
}

/// Where a new index named `name` keeps its entries: `None` for the store
/// table of its name, unless an index holds that one (see
/// [`free_index_storage_in`]).
fn free_index_storage(session: &Session, name: &str) -> Option<String> {
    free_index_storage_in(&held_index_storage(session), name)
}

/// The store tables of every index, as committed or as this transaction
/// sees them (one dropped in it still holds its store table).
pub(super) fn held_index_storage(session: &Session) -> BTreeSet<String> {
    (session.engine().catalog.list().iter())
        .chain(session.tables().iter())
        .flat_map(|def| def.indexes.iter().map(IndexDef::store_table))
        .collect()
}

/// Where a new index named `name` keeps its entries, given the store
/// tables `held`: `None` for the one of its name if it is free, else the
/// first of `name.2`, `name.3`, ... that is.
pub(super) fn free_index_storage_in(held: &BTreeSet<String>, name: &str) -> Option<String> {
    if !held.contains(&IndexDef::store_table_of(name)) {
        return None;
    }
    (2..)
        .map(|n| format!("{name}.{n}"))
        .find(|stored| !held.contains(&IndexDef::store_table_of(stored)))
}

fn option_text(expr: &AstExpr) -> String {
    expr.to_string().trim_matches('\'').to_owned()
}

/// `WITH (partition_key = 'a, b')`; any other table option is refused.
fn partition_option(options: &CreateTableOptions) -> Result<Option<Vec<String>>> {
    let CreateTableOptions::With(options) = options else {
        return Ok(None);
    };
    let mut partition = None;
    for option in options {
        match option {
            SqlOption::KeyValue { key, value }
                if key.value.eq_ignore_ascii_case("partition_key") =>
            {
                partition = Some(
                    option_text(value)
                        .split(',')
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect(),
                );
            }
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "table option {other} is not supported"
                )))
            }
        }
    }
    Ok(partition)
}

fn column_index(columns: &[Column], name: &str) -> Result<usize> {
    columns
        .iter()
        .position(|c| c.name == name)
        .ok_or_else(|| SqlError::undefined_column(name))
}

/// Builds the key mapping from the primary key and the partition option.
fn keys_of(
    columns: &mut [Column],
    primary: Vec<String>,
    partition: Option<Vec<String>>,
) -> Result<Keys> {
    let mut primary: Vec<usize> = primary
        .iter()
        .map(|n| column_index(columns, n))
        .collect::<Result<_>>()?;
    if primary.is_empty() {
        if let (Some(p), Some(r)) = (
            columns.iter().position(|c| c.name == "PartitionKey"),
            columns.iter().position(|c| c.name == "RowKey"),
        ) {
            primary = vec![p, r];
        }
    }
    for &i in &primary {
        columns[i].nullable = false;
    }
    match partition {
        Some(names) => {
            let partition: Vec<usize> = names
                .iter()
                .map(|n| column_index(columns, n))
                .collect::<Result<_>>()?;
            if primary.is_empty() {
                return Err(SqlError::InvalidDefinition(
                    "partition_key needs a PRIMARY KEY that includes its columns".into(),
                ));
            }
            if let Some(&outside) = partition.iter().find(|i| !primary.contains(i)) {
                return Err(SqlError::InvalidDefinition(format!(
                    "partition key column {:?} must be part of the primary key",
                    columns[outside].name
                )));
            }
            let row = primary
                .iter()
                .copied()
                .filter(|i| !partition.contains(i))
                .collect();
            Ok(Keys::Columns { partition, row })
        }
        None if primary.is_empty() => Ok(Keys::Generated),
        None => Ok(Keys::Columns {
            partition: vec![primary[0]],
            row: primary[1..].to_vec(),
        }),
    }
}

/// The columns a key or an index lists; expressions are refused.
fn column_names(
    columns: &[datafusion::sql::sqlparser::ast::IndexColumn],
    what: &str,
) -> Result<Vec<String>> {
    columns
        .iter()
        .map(|c| match &c.column.expr {
            AstExpr::Identifier(ident) => Ok(normalize(ident)),
            other => Err(SqlError::FeatureNotSupported(format!(
                "{what} expression {other} is not supported (only columns)"
            ))),
        })
        .collect()
}

fn primary_columns(constraint: &TableConstraint) -> Result<Vec<String>> {
    match constraint {
        TableConstraint::PrimaryKey(pk) => column_names(&pk.columns, "primary key"),
        other => Err(SqlError::FeatureNotSupported(format!(
            "constraint {other} is not supported (only PRIMARY KEY and FOREIGN KEY)"
        ))),
    }
}

/// Resolves `FOREIGN KEY (columns) REFERENCES table [(columns)] [ON DELETE
/// action] [ON UPDATE action] [DEFERRABLE] [INITIALLY DEFERRED]` of table
/// `def`: the referenced columns must be the referenced table's primary key
/// (its only unique constraint), of types the referencing columns' values
/// can be looked up by.
fn foreign_key(session: &Session, def: &TableDef, fk: &ForeignKeyConstraint) -> Result<ForeignKey> {
    let action = |action: Option<ReferentialAction>| match action {
        None | Some(ReferentialAction::NoAction) => RefAction::NoAction,
        Some(ReferentialAction::Restrict) => RefAction::Restrict,
        Some(ReferentialAction::Cascade) => RefAction::Cascade,
        Some(ReferentialAction::SetNull) => RefAction::SetNull,
        Some(ReferentialAction::SetDefault) => RefAction::SetDefault,
    };
    let characteristics = fk.characteristics.unwrap_or_default();
    if characteristics.enforced == Some(false) {
        return Err(SqlError::FeatureNotSupported(
            "foreign keys NOT ENFORCED are not supported".into(),
        ));
    }
    let deferred = characteristics.initially == Some(DeferrableInitial::Deferred);
    if deferred && characteristics.deferrable == Some(false) {
        return Err(SqlError::value(
            "42601",
            "constraint declared INITIALLY DEFERRED must be DEFERRABLE",
        ));
    }
    let columns: Vec<String> = fk.columns.iter().map(normalize).collect();
    for column in &columns {
        if def.column_index(column).is_none() {
            return Err(SqlError::undefined_column(column));
        }
    }
    let table = table_name(&fk.foreign_table)?;
    let target = if table == def.name {
        Arc::new(def.clone())
    } else {
        session.table(&table)?
    };
    let key = target.key_column_names();
    let referenced: Vec<String> = if fk.referred_columns.is_empty() {
        key.clone()
    } else {
        fk.referred_columns.iter().map(normalize).collect()
    };
    let mut sorted = referenced.clone();
    sorted.sort();
    let mut sorted_key = key;
    sorted_key.sort();
    if referenced.is_empty() || sorted != sorted_key {
        return Err(SqlError::value(
            "42830",
            format!(
                "there is no unique constraint matching given keys for referenced table {table:?}"
            ),
        ));
    }
    if referenced.len() != columns.len() {
        return Err(SqlError::value(
            "42830",
            "number of referencing and referenced columns for foreign key disagree",
        ));
    }
    let name = match &fk.name {
        Some(name) => normalize(name),
        None => format!("{}_{}_fkey", def.name, columns.join("_")),
    };
    if def.foreign_keys.iter().any(|f| f.name == name) {
        return Err(SqlError::InvalidDefinition(format!(
            "constraint {name:?} for relation {:?} already exists",
            def.name
        )));
    }
    for (column, key) in columns.iter().zip(&referenced) {
        let ty = |def: &TableDef, name: &str| def.column_index(name).map(|i| def.columns[i].ty);
        let (Some(own), Some(theirs)) = (ty(def, column), ty(&target, key)) else {
            return Err(SqlError::undefined_column(key));
        };
        if !super::foreign_keys::comparable(own, theirs) {
            return Err(SqlError::value(
                "42804",
                format!("foreign key constraint \"{name}\" cannot be implemented"),
            )
            .explained(
                Some(format!(
                    "Key columns \"{column}\" and \"{key}\" are of incompatible types: {} and {}.",
                    own.pg_name(),
                    theirs.pg_name()
                )),
                None,
            ));
        }
    }
    Ok(ForeignKey {
        name,
        columns,
        table,
        referenced,
        on_delete: action(fk.on_delete),
        on_update: action(fk.on_update),
        deferrable: deferred || characteristics.deferrable == Some(true),
        deferred,
    })
}

/// The column type of a query result column.
pub(super) fn type_of_field(field: &datafusion::arrow::datatypes::Field) -> Result<SqlType> {
    if let Some(ty) = declared_type(field) {
        return Ok(ty);
    }
    Ok(match field.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => SqlType::Text,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => SqlType::Int2,
        DataType::Int32 | DataType::UInt16 => SqlType::Int4,
        DataType::Int64 | DataType::UInt32 => SqlType::Int8,
        DataType::UInt64 => SqlType::Numeric {
            precision: 20,
            scale: 0,
        },
        DataType::Float16 | DataType::Float32 => SqlType::Float4,
        DataType::Float64 => SqlType::Float8,
        DataType::Decimal128(p, s) if *s >= 0 => SqlType::Numeric {
            precision: *p,
            scale: *s as u8,
        },
        DataType::Boolean => SqlType::Bool,
        DataType::Date32 | DataType::Date64 => SqlType::Date,
        DataType::Time32(_) | DataType::Time64(_) => SqlType::Time,
        DataType::Interval(_) => SqlType::Interval,
        DataType::Timestamp(_, None) => SqlType::Timestamp,
        DataType::Timestamp(_, Some(_)) => SqlType::Timestamptz,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => SqlType::Bytea,
        DataType::Null => SqlType::Text,
        other => {
            return Err(SqlError::FeatureNotSupported(format!(
                "column {:?} of type {other} cannot be stored in a table",
                field.name()
            )))
        }
    })
}

/// Records a definition change in the session's transaction.
pub(super) fn define(session: &mut Session, name: &str, after: Option<TableDef>) -> Result<()> {
    let before = session.engine().catalog.get(name);
    session
        .transaction()?
        .define(name, before, after.map(Arc::new));
    Ok(())
}

/// Whether a CREATE finds its name taken: `Ok(true)` to do nothing (IF NOT
/// EXISTS, with PostgreSQL's notice), an error without it, `Ok(false)` when
/// the name is free.
pub(super) fn exists(
    session: &Session,
    taken: bool,
    if_not_exists: bool,
    name: &str,
) -> Result<bool> {
    match (taken, if_not_exists) {
        (false, _) => Ok(false),
        (true, true) => {
            session.notice(format!("relation \"{name}\" already exists, skipping"));
            Ok(true)
        }
        (true, false) => Err(CatalogError::TableExists(name.to_owned()).into()),
    }
}

/// What DROP ... IF EXISTS says of a name it does not find.
pub(super) fn skipped(session: &Session, kind: &str, name: &str) {
    session.notice(format!("{kind} \"{name}\" does not exist, skipping"));
}

pub async fn create_table(session: &mut Session, create: CreateTable) -> Result<Output> {
    let name = table_name(&create.name)?;
    if exists(
        session,
        session.table_def(&name).is_some(),
        create.if_not_exists,
        &name,
    )? {
        return Ok(Output::Command("CREATE TABLE".into()));
    }
    let mut primary = Vec::new();
    let mut columns = Vec::new();
    let mut references = Vec::new();
    let mut sequences = Vec::new();
    let mut uniques = Vec::new();
    let mut checks = Vec::new();
    for def in &create.columns {
        let ColumnDefinition {
            mut column,
            primary: is_primary,
            references: fk,
            unique,
            checks: column_checks,
        } = column_of(def, &session.engine().catalog.types)?;
        if is_primary {
            primary.push(column.name.clone());
        }
        uniques.extend(unique);
        checks.extend(column_checks);
        if serial_type(def).is_some() || column.identity.is_some() {
            let sequence = serial_sequence(&name, &column);
            column.default = Some(nextval_default(&sequence.name));
            column.nullable = false;
            sequences.push(sequence);
        }
        columns.push(column);
        references.extend(fk);
    }
    for constraint in &create.constraints {
        match constraint {
            TableConstraint::ForeignKey(fk) => references.push(fk.clone()),
            TableConstraint::Unique(unique) => uniques.push(unique.clone()),
            TableConstraint::Check(check) => checks.push(check.clone()),
            other => {
                let columns = primary_columns(other)?;
                if !primary.is_empty() {
                    return Err(SqlError::InvalidDefinition(format!(
                        "multiple primary keys for table {name:?} are not allowed"
                    )));
                }
                primary = columns;
            }
        }
    }
    let indexes = (uniques.iter())
        .map(|unique| unique_index(session, &name, unique))
        .collect::<Result<Vec<_>>>()?;
    let partition = partition_option(&create.table_options)?;
    let temporary = temporary_owner(session, &create, &name)?;

    let Some(query) = &create.query else {
        let keys = keys_of(&mut columns, primary, partition)?;
        let mut def = TableDef {
            name: name.clone(),
            columns,
            keys,
            foreign_keys: Vec::new(),
            comment: None,
            indexes,
            view: None,
            plain_view: None,
            checks: Vec::new(),
            grants: Vec::new(),
            temporary,
            triggers_disabled: false,
        };
        for fk in &references {
            let fk = foreign_key(session, &def, fk)?;
            def.foreign_keys.push(fk);
        }
        add_checks(session, &mut def, &checks)?;
        check_definition(&def)?;
        for sequence in sequences {
            create_sequence_def(session, sequence).await?;
        }
        define(session, &name, Some(def))?;
        return Ok(Output::Command("CREATE TABLE".into()));
    };

    // CREATE TABLE ... AS SELECT: the columns are the query's.
    let plan = session.plan_query(&query.to_string()).await?;
    let schema = plan.schema().as_arrow().clone();
    if columns.is_empty() {
        for field in schema.fields() {
            columns.push(Column::new(field.name().as_str(), type_of_field(field)?));
        }
    } else if columns.len() != schema.fields().len() {
        return Err(SqlError::InvalidDefinition(
            "CREATE TABLE AS names a different number of columns than the query returns".into(),
        ));
    }
    if !references.is_empty() || !sequences.is_empty() || !indexes.is_empty() || !checks.is_empty()
    {
        return Err(SqlError::FeatureNotSupported(
            "CREATE TABLE AS does not declare foreign keys, unique or check constraints or serial \
             columns; add them with ALTER TABLE"
                .into(),
        ));
    }
    let keys = keys_of(&mut columns, primary, partition)?;
    let def = TableDef {
        name: name.clone(),
        columns,
        keys,
        foreign_keys: Vec::new(),
        comment: None,
        indexes: Vec::new(),
        view: None,
        plain_view: None,
        checks: Vec::new(),
        grants: Vec::new(),
        temporary,
        triggers_disabled: false,
    };
    check_definition(&def)?;
    define(session, &name, Some(def.clone()))?;
    let rows = fill(session, &def, plan).await?;
    Ok(Output::Command(format!("SELECT {rows}")))
}

/// The owner of a table `CREATE TEMPORARY TABLE` makes: the session,
/// which drops it when it ends. Its rows stay at commits (ON COMMIT
/// PRESERVE ROWS, the default); the other ON COMMIT actions are refused.
fn temporary_owner(
    session: &mut Session,
    create: &CreateTable,
    name: &str,
) -> Result<Option<String>> {
    use datafusion::sql::sqlparser::ast::OnCommit;
    if !create.temporary {
        return Ok(None);
    }
    if matches!(
        create.on_commit,
        Some(OnCommit::DeleteRows | OnCommit::Drop)
    ) {
        return Err(SqlError::FeatureNotSupported(
            "ON COMMIT DELETE ROWS and ON COMMIT DROP are not supported; a temporary table \
             keeps its rows until the session ends"
                .into(),
        ));
    }
    Ok(Some(session.own_temporary_table(name)))
}

/// Inserts a query's rows into a new table.
pub(super) async fn fill(
    session: &mut Session,
    def: &TableDef,
    plan: datafusion::logical_expr::LogicalPlan,
) -> Result<usize> {
    let frame = session.context().execute_logical_plan(plan).await?;
    let (_, mut stream) = session.engine().execute(frame).await?;
    let columns: Vec<usize> = (0..def.columns.len()).collect();
    let mut changes = Vec::new();
    while let Some(batch) = session
        .within_deadline(async { Ok(stream.try_next().await?) })
        .await?
    {
        let arrays: Vec<_> = batch
            .columns()
            .iter()
            .zip(&def.columns)
            .map(|(a, c)| datafusion::arrow::compute::cast(a, &arrow_type(c.ty)))
            .collect::<std::result::Result<_, _>>()?;
        let fields: Vec<_> = def.columns.iter().map(super::types::arrow_field).collect();
        let batch = datafusion::arrow::array::RecordBatch::try_new(
            Arc::new(datafusion::arrow::datatypes::Schema::new(fields)),
            arrays,
        )?;
        for row in batch_to_rows(def, &columns, &batch)? {
            changes.push(Change::insert(def, &row)?);
        }
    }
    let count = changes.len();
    session.apply_to_transaction(changes, &Arc::new(def.clone()))?;
    Ok(count)
}

/// The kinds of relation DROP names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Table,
    View,
    MaterializedView,
}

impl Relation {
    pub fn of(def: &TableDef) -> Relation {
        match (&def.view, &def.plain_view) {
            (Some(_), _) => Relation::MaterializedView,
            (None, Some(_)) => Relation::View,
            (None, None) => Relation::Table,
        }
    }

    /// What PostgreSQL calls it in messages.
    pub fn word(self) -> &'static str {
        match self {
            Relation::Table => "table",
            Relation::View => "view",
            Relation::MaterializedView => "materialized view",
        }
    }
}

/// `DROP TABLE | VIEW | MATERIALIZED VIEW [IF EXISTS] name, ... [CASCADE]`:
/// a relation of another kind is PostgreSQL's 42809, with the statement
/// that drops it in the HINT. With CASCADE the views that read a relation
/// go too (without, the views a relation has keep it: 2BP01).
pub fn drop_relations(
    session: &mut Session,
    kind: Relation,
    names: &[ObjectName],
    if_exists: bool,
    cascade: bool,
) -> Result<Output> {
    let dropping = names
        .iter()
        .map(table_name)
        .collect::<Result<Vec<String>>>()?;
    for name in names {
        let name = table_name(name)?;
        let Some(def) = session.table_def(&name) else {
            if if_exists {
                skipped(session, kind.word(), &name);
                continue;
            }
            return Err(SqlError::value(
                "42P01",
                format!("{} \"{name}\" does not exist", kind.word()),
            ));
        };
        let found = Relation::of(&def);
        if found != kind {
            let hint = format!(
                "Use DROP {} to remove a {}.",
                found.word().to_uppercase(),
                found.word()
            );
            return Err(super::views::not_a(kind.word(), &name, Some(&hint)));
        }
        // The materialized views made from a table's rows.
        if kind == Relation::Table && cascade {
            for view in super::views::readers(session, &name) {
                if view.view.is_some() {
                    define(session, &view.name, None)?;
                }
            }
        }
        if kind == Relation::Table {
            super::foreign_keys::drop_references(session, &name, &dropping, cascade)?;
        }
        super::views::drop_with_dependents(session, &name, kind.word(), cascade)?;
    }
    Ok(Output::Command(format!(
        "DROP {}",
        kind.word().to_uppercase()
    )))
}

/// TRUNCATE empties tables at once, outside any transaction: the store
/// drops a table's data without visiting it, which cannot be part of an
/// atomic write. Inside a block it only empties tables the block created.
pub async fn truncate(session: &mut Session, truncate: Truncate) -> Result<Output> {
    let names = truncate
        .table_names
        .iter()
        .map(|target| table_name(&target.name))
        .collect::<Result<Vec<String>>>()?;
    let cascade = matches!(truncate.cascade, Some(CascadeOption::Cascade));
    let names = super::foreign_keys::truncated_with(session, names, cascade)?;
    for name in names {
        if session.table(&name)?.plain_view.is_some() {
            return Err(super::views::not_a("table", &name, None));
        }
        if let Some(txn) = &mut session.txn {
            if !txn.created(&name) {
                return Err(SqlError::InvalidTransactionState(format!(
                    "TRUNCATE {name:?} cannot run inside a transaction block (only tables created in the block can be truncated there); use DELETE FROM {name:?}, or TRUNCATE outside the block"
                )));
            }
            txn.clear_writes(&name);
            continue;
        }
        // The table, its indexes' entries, and the views made from its
        // rows alone; a view that joins it is computed from other rows too.
        let def = session.table(&name)?;
        if def.view.is_some() {
            return Err(SqlError::WrongObjectType(format!(
                "cannot truncate materialized view {name:?}"
            )));
        }
        let mut store_tables: Vec<String> = std::iter::once(name.clone())
            .chain(def.indexes.iter().map(IndexDef::store_table))
            .collect();
        for view in session.tables() {
            let Some(base) = view.view.as_ref().map(|v| v.base_tables()) else {
                continue;
            };
            if base.first() == Some(&name.as_str()) {
                store_tables.push(view.name.clone());
            } else if base.contains(&name.as_str()) {
                return Err(SqlError::FeatureNotSupported(format!(
                    "TRUNCATE {name:?}: materialized view {:?} joins it; DELETE its rows instead",
                    view.name
                )));
            }
        }
        let store = session.engine().store();
        for store_table in store_tables {
            store.drop_table(&store_table).await?;
            match store.create_table(&store_table).await {
                Ok(()) | Err(StoreError::TableAlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(Output::Command("TRUNCATE TABLE".into()))
}

pub async fn alter_table(session: &mut Session, alter: AlterTable) -> Result<Output> {
    let name = table_name(&alter.name)?;
    // pg_dump gives sequences owners with ALTER TABLE too.
    let owner_only = alter
        .operations
        .iter()
        .all(|o| matches!(o, AlterTableOperation::OwnerTo { .. }));
    if owner_only && session.engine().catalog.sequences.get(&name).is_some() {
        return Ok(Output::Command("ALTER TABLE".into()));
    }
    if alter.if_exists && session.table_def(&name).is_none() {
        skipped(session, "relation", &name);
        return Ok(Output::Command("ALTER TABLE".into()));
    }
    let current = session.table(&name)?;
    if let [AlterTableOperation::RenameTable {
        table_name: RenameTableNameKind::To(new) | RenameTableNameKind::As(new),
    }] = alter.operations.as_slice()
    {
        super::rename::rename_relation(session, &current, &table_name(new)?).await?;
        return Ok(Output::Command("ALTER TABLE".into()));
    }
    if current.plain_view.is_some() {
        // pg_dump gives views owners with ALTER TABLE.
        if owner_only {
            return Ok(Output::Command("ALTER TABLE".into()));
        }
        return Err(super::views::not_a("table", &name, None));
    }
    if current.view.is_some() {
        materialized_view_alters(&name, &alter.operations)?;
    }
    let mut def = (*current).clone();
    let mut rekeyed = false;
    // Columns whose type changes, and columns dropped: the rows are
    // written again.
    let mut retypes: Vec<(String, super::retype::Retype)> = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    // Columns added with a default, which the rows there are take.
    let mut filled = Vec::new();
    // Columns renamed (new name, name in `current`), and whether one of
    // them is a property of the rows, which are written again.
    let mut renamed: Vec<(String, String)> = Vec::new();
    let mut renamed_property = false;
    for operation in &alter.operations {
        match operation {
            AlterTableOperation::AddColumn {
                column_def,
                if_not_exists,
                ..
            } => {
                let ColumnDefinition {
                    column,
                    primary,
                    references,
                    unique,
                    checks,
                } = column_of(column_def, &session.engine().catalog.types)?;
                if def.column_index(&column.name).is_some() {
                    if *if_not_exists {
                        continue;
                    }
                    return Err(SqlError::InvalidDefinition(format!(
                        "column {:?} of relation {name:?} already exists",
                        column.name
                    )));
                }
                if primary || unique.is_some() || column.identity.is_some() {
                    return Err(SqlError::FeatureNotSupported(
                        "ADD COLUMN adds a column without PRIMARY KEY, UNIQUE or identity; \
                         add those with ALTER TABLE ... ADD CONSTRAINT or CREATE UNIQUE INDEX"
                            .into(),
                    ));
                }
                if column.default.is_some() {
                    filled.push(column.name.clone());
                } else if !column.nullable && has_rows(session, &current).await? {
                    return Err(SqlError::value(
                        "23502",
                        format!(
                            "column \"{}\" of relation \"{name}\" contains null values",
                            column.name
                        ),
                    ));
                }
                def.columns.push(column);
                if let Some(fk) = references {
                    let fk = foreign_key(session, &def, &fk)?;
                    def.foreign_keys.push(fk);
                }
                // The rows there are hold the column's default (NULL, or
                // filled below, which checks them).
                add_checks(session, &mut def, &checks)?;
            }
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::Check(check),
                not_valid,
            } => {
                add_checks(session, &mut def, [check])?;
                let added = def.checks.last().expect("a check added");
                if !not_valid {
                    held_by_rows(session, &def.name, added).await?;
                }
            }
            AlterTableOperation::DropConstraint {
                if_exists,
                name: constraint,
                ..
            } => {
                let constraint = normalize(constraint);
                let before = (def.checks.len(), def.foreign_keys.len(), def.indexes.len());
                def.checks.retain(|c| c.name != constraint);
                def.foreign_keys.retain(|f| f.name != constraint);
                // A UNIQUE constraint is its index.
                def.indexes
                    .retain(|i| !(i.constraint && i.name == constraint));
                if before == (def.checks.len(), def.foreign_keys.len(), def.indexes.len()) {
                    let missing = format!(
                        "constraint \"{constraint}\" of relation \"{name}\" does not exist"
                    );
                    if !*if_exists {
                        return Err(SqlError::value("42704", missing));
                    }
                    session.notice(format!("{missing}, skipping"));
                }
            }
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::ForeignKey(fk),
                not_valid,
            } => {
                let fk = foreign_key(session, &def, fk)?;
                if !not_valid {
                    super::foreign_keys::held_by_rows(session, &def, &fk).await?;
                }
                def.foreign_keys.push(fk);
            }
            // Its index is built for the rows there are when the definition
            // commits, which fails on a duplicate.
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::Unique(unique),
                ..
            } => {
                def.indexes.push(unique_index(session, &name, unique)?);
            }
            AlterTableOperation::AddConstraint { constraint, .. } => {
                let primary = primary_columns(constraint)?;
                if !matches!(def.keys, Keys::Generated) {
                    return Err(SqlError::InvalidDefinition(format!(
                        "multiple primary keys for table {name:?} are not allowed"
                    )));
                }
                def.keys = keys_of(&mut def.columns, primary, None)?;
                rekeyed = true;
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let column = normalize(column_name);
                let i = def
                    .column_index(&column)
                    .ok_or_else(|| SqlError::undefined_column_of(&column, &def.name))?;
                match op {
                    AlterColumnOperation::SetDefault { value } => {
                        def.columns[i].default = Some(value.to_string())
                    }
                    AlterColumnOperation::DropDefault => def.columns[i].default = None,
                    AlterColumnOperation::SetNotNull => {
                        if def.columns[i].nullable {
                            holds_no_null(session, &def.name, &column).await?;
                        }
                        def.columns[i].nullable = false;
                    }
                    AlterColumnOperation::DropNotNull if def.is_key_column(i) => {
                        return Err(SqlError::InvalidDefinition(format!(
                            "column \"{column}\" is in a primary key"
                        )))
                    }
                    AlterColumnOperation::DropNotNull => def.columns[i].nullable = true,
                    AlterColumnOperation::SetDataType {
                        data_type, using, ..
                    } => {
                        let types = &session.engine().catalog.types;
                        let (to, enum_type) = super::enums::column_type(types, data_type)?;
                        let explicit = match (using, &enum_type) {
                            (Some(using), None) => {
                                super::retype::explicit_cast(using, &column, to)?
                            }
                            (using, Some(ty)) => {
                                super::enums::check_retype(session, &def, i, using.as_ref(), ty)
                                    .await?;
                                false
                            }
                            (None, None) => false,
                        };
                        def.columns[i].enum_type = enum_type;
                        let digits = super::precision::declared_digits(data_type);
                        let kept = def.columns[i].precision.unwrap_or(MAX_DIGITS);
                        let rounds = digits.is_some_and(|d| d < kept);
                        def.columns[i].precision = digits;
                        let from = def.columns[i].ty;
                        if from != to || rounds {
                            let zone = session.settings().zone();
                            let retype = super::retype::Retype::new(from, to, explicit, zone)?
                                .keeping_digits(digits);
                            retypes.push((column, retype));
                            def.columns[i].ty = to;
                        }
                    }
                    other => {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "ALTER COLUMN {other} is not supported"
                        )))
                    }
                }
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for column in column_names.iter().map(normalize) {
                    let Some(i) = def.column_index(&column) else {
                        let missing =
                            format!("column \"{column}\" of relation \"{name}\" does not exist");
                        if !*if_exists {
                            return Err(SqlError::undefined_column_of(&column, &name));
                        }
                        session.notice(format!("{missing}, skipping"));
                        continue;
                    };
                    if def.is_key_column(i) {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "cannot drop column \"{column}\": it is part of the primary key, \
                             which the rows are stored under"
                        )));
                    }
                    drop_column(&mut def, i);
                    dropped.push(column);
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let (old, new) = (normalize(old_column_name), normalize(new_column_name));
                renamed_property |=
                    super::rename::rename_column(session, &mut def, &old, &new).await?;
                let was = (renamed.iter().position(|(now, _)| *now == old))
                    .map_or(old, |i| renamed.remove(i).1);
                renamed.push((new, was));
            }
            AlterTableOperation::RenameConstraint { old_name, new_name } => {
                let (old, new) = (normalize(old_name), normalize(new_name));
                super::rename::rename_constraint(session, &mut def, &old, &new)?;
            }
            // Ownership is not tracked: every table belongs to the gateway.
            AlterTableOperation::OwnerTo { .. } => {}
            // The only triggers are the foreign keys' (PostgreSQL's system
            // triggers): ALL turns them off or on, USER names none.
            AlterTableOperation::DisableTrigger { name: trigger }
            | AlterTableOperation::EnableTrigger { name: trigger } => {
                let disable = matches!(operation, AlterTableOperation::DisableTrigger { .. });
                match trigger.value.to_ascii_uppercase().as_str() {
                    "ALL" if trigger.quote_style.is_none() => def.triggers_disabled = disable,
                    "USER" if trigger.quote_style.is_none() => {}
                    _ => {
                        return Err(SqlError::value(
                            "42704",
                            format!(
                                "trigger \"{}\" for table \"{name}\" does not exist",
                                trigger.value
                            ),
                        ))
                    }
                }
            }
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "ALTER TABLE {other} is not supported"
                )))
            }
        }
    }
    check_definition(&def)?;
    if rekeyed || !retypes.is_empty() || !dropped.is_empty() || renamed_property {
        let retyped_columns: Vec<Option<&super::retype::Retype>> = (def.columns.iter())
            .map(|c| retypes.iter().find(|(r, _)| *r == c.name).map(|(_, r)| r))
            .collect();
        let sources = (def.columns.iter())
            .map(|c| {
                let was = renamed.iter().find(|(now, _)| *now == c.name);
                current.column_index(was.map_or(&c.name, |(_, was)| was))
            })
            .collect();
        rewrite_rows(
            session,
            &current,
            &def,
            sources,
            |i, value| match retyped_columns[i] {
                Some(retype) => retype.value(value),
                None => Ok(value),
            },
        )
        .await?;
    }
    define(session, &name, Some(def))?;
    // The rows there are take the new columns' defaults, each its own (as
    // PostgreSQL's, a volatile default is computed for each row).
    for column in filled {
        let sql = format!(
            "UPDATE {} SET {} = DEFAULT",
            super::dml::quote(&name),
            super::dml::quote(&column)
        );
        if let Some(datafusion::sql::parser::Statement::Statement(update)) =
            Session::parse(&sql)?.pop()
        {
            Box::pin(session.run_dml(&update, None, None)).await?;
        }
    }
    Ok(Output::Command("ALTER TABLE".into()))
}

/// Refuses what ALTER TABLE does not do to a materialized view, whose
/// columns and rows its query makes: PostgreSQL's 42809 for what it
/// refuses too, 0A000 for RENAME COLUMN (the view's maintenance names its
/// columns after its query's).
fn materialized_view_alters(name: &str, operations: &[AlterTableOperation]) -> Result<()> {
    for operation in operations {
        let action = match operation {
            AlterTableOperation::OwnerTo { .. } | AlterTableOperation::RenameConstraint { .. } => {
                continue
            }
            AlterTableOperation::RenameColumn { .. } => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "renaming a column of materialized view \"{name}\" is not supported"
                )))
            }
            AlterTableOperation::AddColumn { .. } => "ADD COLUMN".to_owned(),
            AlterTableOperation::DropColumn { .. } => "DROP COLUMN".to_owned(),
            AlterTableOperation::AddConstraint { .. } => "ADD CONSTRAINT".to_owned(),
            AlterTableOperation::DropConstraint { .. } => "DROP CONSTRAINT".to_owned(),
            AlterTableOperation::AlterColumn { op, .. } => {
                let what = match op {
                    AlterColumnOperation::SetNotNull => "SET NOT NULL",
                    AlterColumnOperation::DropNotNull => "DROP NOT NULL",
                    AlterColumnOperation::SetDefault { .. } => "SET DEFAULT",
                    AlterColumnOperation::DropDefault => "DROP DEFAULT",
                    AlterColumnOperation::SetDataType { .. } => "SET DATA TYPE",
                    _ => "",
                };
                format!("ALTER COLUMN ... {what}")
            }
            other => other.to_string(),
        };
        return Err(SqlError::WrongObjectType(format!(
            "ALTER action {action} cannot be performed on relation \"{name}\""
        ))
        .explained(
            Some("This operation is not supported for materialized views.".into()),
            None,
        ));
    }
    Ok(())
}

/// Removes column `i` from `def`, with the indexes, foreign keys and
/// CHECK constraints that read it (as PostgreSQL's DROP COLUMN).
fn drop_column(def: &mut TableDef, i: usize) {
    let column = def.columns[i].name.clone();
    def.indexes.retain(|index| !index.columns.contains(&column));
    def.foreign_keys.retain(|fk| !fk.columns.contains(&column));
    def.checks = (def.checks.iter())
        .filter(|check| {
            super::rewrite::parse_expr(&check.expr)
                .is_none_or(|expr| !columns_read(def, &expr).contains(&column))
        })
        .cloned()
        .collect();
    def.columns.remove(i);
    // Keys name columns by position.
    if let Keys::Columns { partition, row } = &mut def.keys {
        for k in partition.iter_mut().chain(row.iter_mut()) {
            if *k > i {
                *k -= 1;
            }
        }
    }
}

/// Whether a row of the table meets `condition` (SQL over its columns).
async fn some_row(session: &Session, table: &str, condition: &str) -> Result<bool> {
    let sql = format!(
        "SELECT 1 FROM {} WHERE {condition} LIMIT 1",
        super::dml::quote(table)
    );
    Ok(!session.query_text_rows(&sql).await?.is_empty())
}

/// Refuses SET NOT NULL on a column a row holds NULL in.
async fn holds_no_null(session: &Session, table: &str, column: &str) -> Result<()> {
    let condition = format!("{} IS NULL", super::dml::quote(column));
    match some_row(session, table, &condition).await? {
        false => Ok(()),
        true => Err(SqlError::value(
            "23502",
            format!("column \"{column}\" of relation \"{table}\" contains null values"),
        )),
    }
}

/// Refuses a CHECK constraint that a row of the table makes false.
async fn held_by_rows(session: &Session, table: &str, check: &Check) -> Result<()> {
    match some_row(session, table, &format!("NOT ({})", check.expr)).await? {
        false => Ok(()),
        true => Err(SqlError::value(
            "23514",
            format!(
                "check constraint \"{}\" of relation \"{table}\" is violated by some row",
                check.name
            ),
        )),
    }
}

/// Whether a relation has the name: tables, sequences and indexes (primary
/// keys' included) share names.
pub(super) fn name_taken(session: &Session, name: &str) -> bool {
    session.table_def(name).is_some()
        || session.engine().catalog.sequences.get(name).is_some()
        || session
            .tables()
            .iter()
            .flat_map(|t| indexes_of(t))
            .any(|i| i.name == name)
}

/// The table that has an index of this name.
pub(super) fn table_of_index(session: &Session, name: &str) -> Option<Arc<TableDef>> {
    session
        .tables()
        .into_iter()
        .find(|def| def.indexes.iter().any(|i| i.name == name))
}

/// `CREATE [UNIQUE] INDEX [IF NOT EXISTS] [name] ON table [USING btree]
/// (column, ...)`: index entities in a store table of their own, built
/// for the rows there are and kept by every later write (see
/// `Catalog::commit`).
///
/// With `building`, the index is defined empty and marked as being built:
/// the caller builds it after the definition commits (see
/// `Catalog::build_index`), and returns the table and index to build.
pub fn create_index(
    session: &mut Session,
    create: CreateIndex,
    building: bool,
) -> Result<(Output, Option<(String, String)>)> {
    let table = table_name(&create.table_name)?;
    let current = session.table(&table)?;
    if current.plain_view.is_some() {
        return Err(SqlError::WrongObjectType(format!(
            "cannot create index on relation \"{table}\""
        ))
        .explained(
            Some("This operation is not supported for views.".into()),
            None,
        ));
    }
    if current.view.is_some() {
        return Err(SqlError::FeatureNotSupported(format!(
            "indexes on materialized view {table:?} are not supported: give the view the key its queries filter on"
        )));
    }
    if create.predicate.is_some() || !create.include.is_empty() {
        return Err(SqlError::FeatureNotSupported(
            "partial indexes and INCLUDE are not supported".into(),
        ));
    }
    let mut intra_partition = false;
    for option in &create.with {
        match option
            .to_string()
            .to_ascii_lowercase()
            .replace(' ', "")
            .as_str()
        {
            "intra_partition=true" | "intra_partition='true'" => intra_partition = true,
            "intra_partition=false" | "intra_partition='false'" => intra_partition = false,
            _ => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "index option {option} is not supported (only intra_partition = true|false)"
                )))
            }
        }
    }
    if intra_partition && (create.unique || matches!(current.keys, Keys::Generated)) {
        return Err(SqlError::FeatureNotSupported(
            "an intra-partition index cannot be UNIQUE, and needs a table with a primary key"
                .into(),
        ));
    }
    if let Some(using) = &create.using {
        if !using.to_string().eq_ignore_ascii_case("btree") {
            return Err(SqlError::FeatureNotSupported(format!(
                "index method {using} is not supported (indexes are ordered, like btree)"
            )));
        }
    }
    let columns = column_names(&create.columns, "index")?;
    let name = match &create.name {
        Some(name) => table_name(name)?,
        None => format!("{table}_{}_idx", columns.join("_")),
    };
    let done = Output::Command("CREATE INDEX".into());
    if exists(
        session,
        name_taken(session, &name),
        create.if_not_exists,
        &name,
    )? {
        return Ok((done, None));
    }
    let mut def = (*current).clone();
    def.indexes.push(IndexDef {
        stored_as: free_index_storage(session, &name),
        name: name.clone(),
        columns,
        unique: create.unique,
        intra_partition,
        building,
        constraint: false,
    });
    check_definition(&def)?;
    define(session, &table, Some(def))?;
    Ok((done, building.then_some((table, name))))
}

/// Whether a statement is one of those read here rather than by the SQL
/// parser (CREATE and ALTER SEQUENCE, VERIFY INDEX), and the columns it
/// returns: prepared statements (JDBC sends nothing else) describe them so.
pub fn text_command(sql: &str) -> Option<Option<datafusion::arrow::datatypes::SchemaRef>> {
    let words = first_words(sql);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["create", "sequence", ..]
        | ["create", "temp" | "temporary", "sequence"]
        | ["alter", "sequence", ..] => Some(None),
        ["verify", "index", ..] | ["verify", "materialized", "view"] => Some(Some(verify_schema())),
        ["refresh", "materialized", "view"] => Some(None),
        ["tablegate", "advise", ..] => Some(Some(super::diagnostics::advise::schema())),
        ["set", "constraints", ..] => Some(None),
        ["alter", "type", ..] if super::enums::owner_change(sql).is_some() => Some(None),
        _ => None,
    }
}

/// `SET CONSTRAINTS {ALL | name, ...} {IMMEDIATE | DEFERRED}` (see
/// [`super::foreign_keys::set_constraints`]); outside a transaction block
/// PostgreSQL warns that it does nothing. `None` for any other statement.
pub async fn set_constraints(session: &mut Session, sql: &str) -> Option<Result<Output>> {
    use datafusion::sql::sqlparser::tokenizer::{Span, Token, Tokenizer};
    if !matches!(first_words(sql).as_slice(), [set, constraints, ..] if set == "set" && constraints == "constraints")
    {
        return None;
    }
    let tokens = match Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() {
        Ok(tokens) => tokens,
        Err(e) => return Some(Err(SqlError::Syntax(e.to_string()))),
    };
    let words: Vec<Token> = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF))
        .skip(2)
        .collect();
    let keyword = |t: &Token, k: &str| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    let Some((mode, targets)) = words.split_last() else {
        return Some(Err(SqlError::Syntax(
            "SET CONSTRAINTS needs ALL or names, and IMMEDIATE or DEFERRED".into(),
        )));
    };
    let deferred = match mode {
        m if keyword(m, "deferred") => true,
        m if keyword(m, "immediate") => false,
        other => {
            return Some(Err(SqlError::Syntax(format!(
            "syntax error at or near \"{other}\": SET CONSTRAINTS ends with IMMEDIATE or DEFERRED"
        ))))
        }
    };
    let names = match targets {
        [all] if keyword(all, "all") => None,
        _ => {
            // Names, maybe schema-qualified, separated by commas.
            let mut names = Vec::new();
            for part in targets.split(|t| matches!(t, Token::Comma)) {
                match part.last() {
                    Some(Token::Word(w)) => {
                        names.push(normalize(&w.clone().into_ident(Span::empty())))
                    }
                    _ => {
                        return Some(Err(SqlError::Syntax(format!(
                            "SET CONSTRAINTS names ALL or constraints: {sql}"
                        ))))
                    }
                }
            }
            Some(names)
        }
    };
    if session.txn.is_none() {
        session.notice("SET CONSTRAINTS can only be used in transaction blocks".into());
        return Some(Ok(Output::Command("SET CONSTRAINTS".into())));
    }
    let set = super::foreign_keys::set_constraints(session, names, deferred).await;
    Some(set.map(|()| Output::Command("SET CONSTRAINTS".into())))
}

/// A statement's first three words, in lower case, without semicolons.
pub fn first_words(sql: &str) -> Vec<String> {
    sql.split_whitespace()
        .take(3)
        .map(|w| w.trim_end_matches(';').to_ascii_lowercase())
        .collect()
}

/// The columns of VERIFY INDEX.
fn verify_schema() -> datafusion::arrow::datatypes::SchemaRef {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    Arc::new(Schema::new(vec![
        Field::new("difference", DataType::Utf8, false),
        Field::new("entry", DataType::Utf8, false),
    ]))
}

/// `VERIFY INDEX name`: recomputes the index from its table and returns one
/// row per difference (`missing`, `extra` or `different`, and the entry's
/// key); no rows when the index is right. `None` for any other statement.
pub async fn verify_index(session: &Session, sql: &str) -> Option<Result<Output>> {
    let words: Vec<&str> = sql
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect();
    let [verify, index, name] = words.as_slice() else {
        return None;
    };
    if !verify.eq_ignore_ascii_case("verify") || !index.eq_ignore_ascii_case("index") {
        return None;
    }
    let name = name.trim_matches('"').to_owned();
    Some(
        async {
            let table =
                table_of_index(session, &name).ok_or(CatalogError::TableNotFound(name.clone()))?;
            let index = table
                .indexes
                .iter()
                .find(|i| i.name == name)
                .ok_or_else(|| CatalogError::TableNotFound(name.clone()))?;
            let differences = session
                .engine()
                .catalog
                .verify_index(&table, index, session.deadline())
                .await?;
            session
                .engine()
                .monitor
                .record_verification(&name, differences.len() as u64);
            verify_output(
                differences
                    .iter()
                    .map(|d| match d {
                        crate::catalog::IndexDifference::Missing(k) => ("missing", k.to_string()),
                        crate::catalog::IndexDifference::Extra(k) => ("extra", k.to_string()),
                        crate::catalog::IndexDifference::Different(k) => {
                            ("different", k.to_string())
                        }
                    })
                    .collect(),
            )
        }
        .await,
    )
}

/// The rows of VERIFY INDEX and VERIFY MATERIALIZED VIEW: one per
/// difference, its kind and what differs.
pub(super) fn verify_output(differences: Vec<(&'static str, String)>) -> Result<Output> {
    use datafusion::arrow::array::{RecordBatch, StringArray};
    let (kinds, entries): (Vec<&str>, Vec<String>) = differences.into_iter().unzip();
    let schema = verify_schema();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(kinds)),
            Arc::new(StringArray::from(entries)),
        ],
    )?;
    Output::from_batches(schema, vec![batch], "VERIFY")
}

/// `DROP INDEX [IF EXISTS] name, ...`.
pub fn drop_indexes(
    session: &mut Session,
    names: &[ObjectName],
    if_exists: bool,
) -> Result<Output> {
    for name in names {
        let name = table_name(name)?;
        let Some(current) = table_of_index(session, &name) else {
            if if_exists {
                skipped(session, "index", &name);
                continue;
            }
            return Err(CatalogError::TableNotFound(name).into());
        };
        let table = current.name.clone();
        if current
            .indexes
            .iter()
            .any(|i| i.name == name && i.constraint)
        {
            return Err(SqlError::Catalog(CatalogError::Dependent(format!(
                "cannot drop index {name} because constraint {name} on table {table} requires it"
            )))
            .explained(
                None,
                Some(format!(
                    "You can drop constraint {name} on table {table} instead."
                )),
            ));
        }
        let mut def = (*current).clone();
        def.indexes.retain(|i| i.name != name);
        define(session, &table, Some(def))?;
    }
    Ok(Output::Command("DROP INDEX".into()))
}

/// `COMMENT ON TABLE t IS '...'` and `COMMENT ON COLUMN t.c IS '...'`
/// (`IS NULL` removes the comment).
pub fn comment(
    session: &mut Session,
    object_type: CommentObject,
    name: &ObjectName,
    comment: Option<String>,
    if_exists: bool,
) -> Result<Output> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident())
        .map(normalize)
        .collect();
    let (table, column) = match (object_type, parts.as_slice()) {
        (CommentObject::Table | CommentObject::View, [.., table]) => (table.clone(), None),
        (CommentObject::Column, [.., table, column]) => (table.clone(), Some(column.clone())),
        (other, _) => {
            return Err(SqlError::FeatureNotSupported(format!(
                "COMMENT ON {other} is not supported (only tables and columns)"
            )))
        }
    };
    let Some(current) = session.table_def(&table) else {
        if if_exists {
            return Ok(Output::Command("COMMENT".into()));
        }
        return Err(CatalogError::TableNotFound(table).into());
    };
    let mut def = (*current).clone();
    match column {
        None => def.comment = comment,
        Some(column) => {
            let i = def
                .column_index(&column)
                .ok_or_else(|| SqlError::undefined_column_of(&column, &table))?;
            def.columns[i].comment = comment;
        }
    }
    define(session, &table, Some(def))?;
    Ok(Output::Command("COMMENT".into()))
}

/// Most rows an ALTER TABLE writes again (ADD PRIMARY KEY, DROP COLUMN,
/// a column's TYPE, RENAME of a column the rows hold or of the table):
/// each row is written again in the statement's one atomic write, which
/// holds them in memory.
pub const MAX_REWRITTEN_ROWS: usize = 1_000_000;

/// Whether a table holds a row, as the session sees it.
async fn has_rows(session: &Session, def: &TableDef) -> Result<bool> {
    let view = session.current_view();
    let query = Query::table().page_size(1).project(Vec::<String>::new());
    let mut continuation = None;
    loop {
        let page = view.query(&def.name, &query, continuation.as_ref()).await?;
        if !page.entities.is_empty() {
            return Ok(true);
        }
        continuation = page.continuation;
        if continuation.is_none() {
            return Ok(false);
        }
    }
}

/// Writes every row of `old` again as a row of `new`: the row's values
/// for `new`'s columns (from the column of `old` each one's source is; a
/// column `new` adds has none, and is NULL) made by `convert`, under its
/// key in `new` (a row whose key changes is deleted under its old one:
/// two rows of one key fail with 23505, a NULL key column with 23502).
/// When `new` is another table (`old` renamed), each row is inserted
/// there, and `old` goes with its rows.
pub(super) async fn rewrite_rows(
    session: &mut Session,
    old: &Arc<TableDef>,
    new: &TableDef,
    sources: Vec<Option<usize>>,
    convert: impl Fn(usize, Value) -> Result<Value>,
) -> Result<()> {
    let view = session.current_view();
    let moved = new.name != old.name;
    let mut deletes = Vec::new();
    let mut writes = Vec::new();
    let mut continuation = None;
    loop {
        let page = view
            .query(&old.name, &Query::table(), continuation.as_ref())
            .await?;
        for entity in page.entities {
            if writes.len() == MAX_REWRITTEN_ROWS {
                return Err(SqlError::value(
                    "54000",
                    format!(
                        "table {:?} holds more than {MAX_REWRITTEN_ROWS} rows, the most ALTER TABLE \
                         writes again; create the table as it should be and copy the rows into it",
                        old.name
                    ),
                ));
            }
            let mut old_row = old.entity_to_row(&entity)?;
            let mut row = Vec::with_capacity(new.columns.len());
            for (i, source) in sources.iter().enumerate() {
                let value = source.and_then(|j| old_row[j].take());
                row.push(value.map(|v| convert(i, v)).transpose()?);
            }
            new.check_row(&row)?;
            let key = new.entity_key(&row)?;
            let rewritten = new.row_to_entity(key.clone(), &row)?;
            if key == entity.key && !moved {
                writes.extend(Change::rewrite(&new.name, key, entity.etag, rewritten));
                continue;
            }
            writes.push(Change {
                table: new.name.clone(),
                new: Some(rewritten),
                key,
                read: None,
                creates: true,
                moved_to: None,
            });
            if moved {
                continue;
            }
            deletes.push(Change {
                table: old.name.clone(),
                key: entity.key,
                read: entity.etag,
                new: None,
                creates: false,
                moved_to: None,
            });
        }
        continuation = page.continuation;
        if continuation.is_none() {
            break;
        }
    }
    deletes.extend(writes);
    session.apply_to_transaction(deletes, old)
}

/// Creates a sequence; a relation of the same name is an error (42P07), as
/// tables and sequences share their names.
///
/// A sequence is created at once, even inside a transaction block, so that
/// the block can draw from it; the block records it, and it is dropped
/// again if the block does not commit (see `Transaction::sequences`).
async fn create_sequence_def(session: &mut Session, def: SequenceDef) -> Result<()> {
    if session.table_def(&def.name).is_some() {
        return Err(CatalogError::TableExists(def.name).into());
    }
    let engine = session.engine().clone();
    let sequences = &engine.catalog.sequences;
    // One left by a crash in the middle of a block that created its table.
    if let Some(old) = sequences.get(&def.name) {
        if let Some((table, _)) = &old.def.owned_by {
            if session.table_def(table).is_none() {
                sequences.drop(&def.name).await?;
            }
        }
    }
    let name = def.name.clone();
    sequences.create(def).await?;
    if let Some(txn) = &mut session.txn {
        txn.sequences.created.push(name);
    }
    Ok(())
}

/// CREATE SEQUENCE and ALTER SEQUENCE, read here rather than by the SQL
/// parser, which knows no ALTER SEQUENCE and takes CREATE SEQUENCE's options
/// only in one order (pg_dump writes START before INCREMENT); `None` for any
/// other statement.
///
/// `CREATE SEQUENCE [IF NOT EXISTS] name [AS type] [INCREMENT [BY] n]
/// [MINVALUE n | NO MINVALUE] [MAXVALUE n | NO MAXVALUE] [START [WITH] n]
/// [CACHE n] [[NO] CYCLE] [OWNED BY table.column | NONE]`, and `ALTER
/// SEQUENCE name OWNED BY table.column | NONE`.
pub async fn sequence_command(session: &mut Session, sql: &str) -> Option<Result<Output>> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut words = SequenceWords(
        tokens
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF))
            .collect(),
        0,
    );
    let (create, temporary) = if words.keyword("create") {
        (true, words.keyword("temp") || words.keyword("temporary"))
    } else if words.keyword("alter") {
        (false, false)
    } else {
        return None;
    };
    if !words.keyword("sequence") {
        return None;
    }
    if temporary {
        return Some(Err(SqlError::FeatureNotSupported(
            "temporary sequences are not supported".into(),
        )));
    }
    Some(sequence_statement(session, create, &mut words).await)
}

/// The tokens of a sequence statement, and how many are read.
struct SequenceWords(Vec<datafusion::sql::sqlparser::tokenizer::Token>, usize);

impl SequenceWords {
    fn peek(&self) -> Option<&datafusion::sql::sqlparser::tokenizer::Token> {
        self.0.get(self.1)
    }

    /// Reads an unquoted keyword, if it comes next.
    fn keyword(&mut self, keyword: &str) -> bool {
        use datafusion::sql::sqlparser::tokenizer::Token;
        let found = matches!(self.peek(), Some(Token::Word(w))
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(keyword));
        if found {
            self.1 += 1;
        }
        found
    }

    /// A possibly qualified name, its parts normalized.
    fn name(&mut self) -> Result<Vec<String>> {
        use datafusion::sql::sqlparser::tokenizer::Token;
        let mut parts = Vec::new();
        loop {
            match self.peek() {
                Some(Token::Word(w)) => {
                    parts.push(normalize(
                        &w.to_ident(datafusion::sql::sqlparser::tokenizer::Span::empty()),
                    ));
                    self.1 += 1;
                }
                other => {
                    return Err(SqlError::Syntax(format!(
                        "expected a name, found {}",
                        other.map_or("the end".to_owned(), |t| t.to_string())
                    )))
                }
            }
            if matches!(self.peek(), Some(Token::Period)) {
                self.1 += 1;
            } else {
                return Ok(parts);
            }
        }
    }

    fn number(&mut self) -> Result<i64> {
        use datafusion::sql::sqlparser::tokenizer::Token;
        let negative = matches!(self.peek(), Some(Token::Minus));
        if negative {
            self.1 += 1;
        }
        match self.peek() {
            Some(Token::Number(n, _)) => {
                let n: i64 = n
                    .parse()
                    .map_err(|_| SqlError::Syntax(format!("{n} is not a bigint")))?;
                self.1 += 1;
                Ok(if negative { -n } else { n })
            }
            other => Err(SqlError::Syntax(format!(
                "expected an integer, found {}",
                other.map_or("the end".to_owned(), |t| t.to_string())
            ))),
        }
    }
}

async fn sequence_statement(
    session: &mut Session,
    create: bool,
    words: &mut SequenceWords,
) -> Result<Output> {
    let verb = if create { "CREATE" } else { "ALTER" };
    let if_exists = if create {
        words.keyword("if") && words.keyword("not") && words.keyword("exists")
    } else {
        words.keyword("if") && words.keyword("exists")
    };
    let name = words.name()?.pop().unwrap_or_default();
    let sequences = &session.engine().catalog.sequences;
    let existing = sequences.get(&name);
    if create && if_exists && exists(session, existing.is_some(), true, &name)? {
        return Ok(Output::Command("CREATE SEQUENCE".into()));
    }
    if !create && existing.is_none() {
        if if_exists {
            skipped(session, "relation", &name);
            return Ok(Output::Command("ALTER SEQUENCE".into()));
        }
        return Err(CatalogError::TableNotFound(name).into());
    }
    let mut ty = SqlType::Int8;
    let (mut increment, mut min, mut max, mut start, mut cycle, mut owner) =
        (None, None, None, None, None, None);
    while words.peek().is_some() {
        if words.keyword("as") {
            let type_name = words.name()?.pop().unwrap_or_default();
            ty = match type_name.as_str() {
                "smallint" | "int2" => SqlType::Int2,
                "integer" | "int" | "int4" => SqlType::Int4,
                "bigint" | "int8" => SqlType::Int8,
                other => {
                    return Err(SqlError::InvalidDefinition(format!(
                        "sequence type must be smallint, integer, or bigint, not {other}"
                    )))
                }
            };
        } else if words.keyword("increment") {
            words.keyword("by");
            increment = Some(words.number()?);
        } else if words.keyword("minvalue") {
            min = Some(Some(words.number()?));
        } else if words.keyword("maxvalue") {
            max = Some(Some(words.number()?));
        } else if words.keyword("no") {
            if words.keyword("minvalue") {
                min = Some(None);
            } else if words.keyword("maxvalue") {
                max = Some(None);
            } else if words.keyword("cycle") {
                cycle = Some(false);
            } else {
                return Err(SqlError::Syntax(
                    "expected MINVALUE, MAXVALUE or CYCLE after NO".into(),
                ));
            }
        } else if words.keyword("start") {
            words.keyword("with");
            start = Some(words.number()?);
        } else if words.keyword("cache") {
            // Values are handed out from memory anyway.
            words.number()?;
        } else if words.keyword("cycle") {
            cycle = Some(true);
        } else if words.keyword("owned") && words.keyword("by") {
            let parts = words.name()?;
            owner = Some(owner_column(session, &parts)?);
        } else {
            return Err(SqlError::FeatureNotSupported(format!(
                "{verb} SEQUENCE option {} is not supported",
                words.peek().map(|t| t.to_string()).unwrap_or_default()
            )));
        }
    }
    if !create {
        if increment.is_some()
            || min.is_some()
            || max.is_some()
            || start.is_some()
            || cycle.is_some()
        {
            return Err(SqlError::FeatureNotSupported(
                "ALTER SEQUENCE supports only OWNED BY; use setval() to move a sequence".into(),
            ));
        }
        let mut def = existing
            .map(|s| s.def.clone())
            .unwrap_or_else(|| SequenceDef::new(&name, ty));
        def.owned_by = owner.flatten();
        sequences.alter(def).await?;
        return Ok(Output::Command("ALTER SEQUENCE".into()));
    }
    let mut def = SequenceDef::new(&name, ty);
    def.increment = increment.unwrap_or(1);
    def.cycle = cycle.unwrap_or(false);
    // PostgreSQL's defaults: ascending sequences start at their minimum,
    // descending ones at their maximum.
    let ascending = def.increment > 0;
    def.min = min.flatten().unwrap_or(if ascending {
        1
    } else {
        SequenceDef::type_min(ty)
    });
    def.max = max.flatten().unwrap_or(if ascending {
        SequenceDef::type_max(ty)
    } else {
        -1
    });
    def.start = start.unwrap_or(if ascending { def.min } else { def.max });
    def.owned_by = owner.flatten();
    create_sequence_def(session, def).await?;
    Ok(Output::Command("CREATE SEQUENCE".into()))
}

/// `OWNED BY table.column` (or `NONE`): the column, which must exist.
fn owner_column(session: &Session, parts: &[String]) -> Result<Option<(String, String)>> {
    if parts.len() == 1 && parts[0] == "none" {
        return Ok(None);
    }
    let [.., table, column] = parts else {
        return Err(SqlError::Syntax(format!(
            "OWNED BY needs table.column, not {}",
            parts.join(".")
        )));
    };
    let def = session.table(table)?;
    if def.column_index(column).is_none() {
        return Err(SqlError::undefined_column_of(column, table));
    }
    Ok(Some((table.clone(), column.clone())))
}

/// DROP SEQUENCE: at once, or at COMMIT inside a transaction block.
pub async fn drop_sequences(
    session: &mut Session,
    names: &[ObjectName],
    if_exists: bool,
) -> Result<Output> {
    for name in names {
        let name = table_name(name)?;
        let engine = session.engine().clone();
        match engine.catalog.sequences.get(&name) {
            Some(_) => match &mut session.txn {
                Some(txn) => txn.sequences.dropped.push(name),
                None => engine.catalog.sequences.drop(&name).await?,
            },
            None if if_exists => skipped(session, "sequence", &name),
            None => return Err(CatalogError::TableNotFound(name).into()),
        }
    }
    Ok(Output::Command("DROP SEQUENCE".into()))
}
