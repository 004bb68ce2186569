//! The names PostgreSQL gives result columns that the query does not name:
//! `count(*)` is `count`, `x::text` is `x`, `1::int` is `int4`, `SELECT 1` is
//! `?column?` (PostgreSQL's `FigureColname`). DataFusion names such columns
//! after their expression (`count(*)`, `Int64(1)`); clients that read results
//! by column name (pandas, BI tools) expect PostgreSQL's. PostgreSQL allows
//! two columns of one name, DataFusion's plans do not, so the names are put
//! on the result's schema, not into the plan.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{
    DataType, Expr, Ident, Query, SelectItem, SetExpr, Statement,
};

use super::session::normalize;

/// What PostgreSQL names an unnamed column when nothing better is known.
const UNNAMED: &str = "?column?";

/// What hidden aliases begin with.
const HIDDEN: &str = "__tablegate_column";

/// The alias of the `i`th select item, where the name it would be given
/// is not one the plan can hold (a repeat, or an item rewritten). A
/// select item with a hidden alias is named as its expression would be
/// (a rewritten text parsed again names its columns as the text it came
/// from).
pub fn hidden_alias(i: usize) -> Ident {
    Ident::new(format!("{HIDDEN}{i}"))
}

/// A name and how sure it is: a column or function name beats a type name
/// (from a cast), which beats nothing.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Strength {
    None,
    TypeName,
    Name,
}

/// PostgreSQL's internal name of a type, as a cast names its column.
fn type_name(ty: &DataType) -> String {
    let text = ty.to_string().to_lowercase();
    // An array type is named by its element's type (`'{a}'::text[]` is `text`).
    let base = text.split(['(', '[']).next().unwrap_or(&text).trim();
    match base {
        "int" | "integer" | "int4" => "int4",
        "bigint" | "int8" => "int8",
        "smallint" | "int2" => "int2",
        "real" | "float4" => "float4",
        "double precision" | "float8" | "double" => "float8",
        "boolean" | "bool" => "bool",
        "character varying" | "varchar" => "varchar",
        "character" | "char" => "bpchar",
        "decimal" | "numeric" => "numeric",
        "timestamp with time zone" | "timestamptz" => "timestamptz",
        "timestamp" | "timestamp without time zone" => "timestamp",
        other => return other.to_owned(),
    }
    .to_owned()
}

fn figure(expr: &Expr) -> (String, Strength) {
    match expr {
        Expr::Identifier(ident) => (ident.value.clone(), Strength::Name),
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(last) => (last.value.clone(), Strength::Name),
            None => (UNNAMED.into(), Strength::None),
        },
        Expr::Function(f) => {
            let name = f
                .name
                .0
                .last()
                .and_then(|part| part.as_ident())
                .map(|ident| ident.value.to_lowercase());
            match name {
                Some(name) => (name, Strength::Name),
                None => (UNNAMED.into(), Strength::None),
            }
        }
        Expr::Cast {
            expr, data_type, ..
        } => {
            let (name, strength) = figure(expr);
            if strength == Strength::Name {
                (name, strength)
            } else {
                (type_name(data_type), Strength::TypeName)
            }
        }
        Expr::Nested(inner) => figure(inner),
        // `tags[1]` is named by its array.
        Expr::CompoundFieldAccess { root, .. } => figure(root),
        Expr::Case { .. } => ("case".into(), Strength::TypeName),
        Expr::Exists { .. } => ("exists".into(), Strength::Name),
        Expr::Array(_) => ("array".into(), Strength::TypeName),
        Expr::Subquery(query) => match first_name(query) {
            Some(name) => (name, Strength::Name),
            None => (UNNAMED.into(), Strength::None),
        },
        Expr::Position { .. } => ("position".into(), Strength::Name),
        Expr::Substring { shorthand, .. } => match shorthand {
            true => ("substr".into(), Strength::Name),
            false => ("substring".into(), Strength::Name),
        },
        Expr::Trim { .. } => ("btrim".into(), Strength::Name),
        Expr::Extract { .. } => ("extract".into(), Strength::Name),
        Expr::Ceil { .. } => ("ceil".into(), Strength::Name),
        Expr::Floor { .. } => ("floor".into(), Strength::Name),
        Expr::Overlay { .. } => ("overlay".into(), Strength::Name),
        // `t AT TIME ZONE z` is PostgreSQL's `timezone(z, t)`.
        Expr::AtTimeZone { .. } => ("timezone".into(), Strength::Name),
        // `date '2024-01-01'` is a cast of a literal.
        Expr::TypedString(typed) => (type_name(&typed.data_type), Strength::TypeName),
        Expr::Interval(_) => ("interval".into(), Strength::TypeName),
        _ => (UNNAMED.into(), Strength::None),
    }
}

/// The first column name of a subquery (what `(SELECT max(x) FROM t)` is called).
fn first_name(query: &Query) -> Option<String> {
    let select = leftmost_select(&query.body)?;
    match select.first()? {
        SelectItem::UnnamedExpr(e) => Some(figure(e).0),
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
        _ => None,
    }
}

fn leftmost_select(body: &SetExpr) -> Option<&Vec<SelectItem>> {
    match body {
        SetExpr::Select(select) => Some(&select.projection),
        SetExpr::SetOperation { left, .. } => leftmost_select(left),
        SetExpr::Query(q) => leftmost_select(&q.body),
        _ => None,
    }
}

/// What a query's select list says about its result column names, read
/// before the query is rewritten or planned.
#[derive(Debug, Clone)]
pub struct ColumnNames(Vec<Item>);

#[derive(Debug, Clone)]
enum Item {
    /// PostgreSQL's name for an unnamed expression, or an alias.
    Named(String),
    /// `*` or `t.*`: DataFusion's column names.
    Wildcard,
}

impl ColumnNames {
    /// The select list of a query; `None` for other statements.
    pub fn of(statement: &Statement) -> Option<ColumnNames> {
        let Statement::Query(query) = statement else {
            return None;
        };
        let items = leftmost_select(&query.body)?;
        Some(ColumnNames(
            items
                .iter()
                .map(|item| match item {
                    SelectItem::UnnamedExpr(e) => Item::Named(figure(e).0),
                    SelectItem::ExprWithAlias { expr, alias } => {
                        match alias.value.strip_prefix(HIDDEN) {
                            Some(_) => Item::Named(figure(expr).0),
                            None => Item::Named(normalize(alias)),
                        }
                    }
                    // Only a table function's items have several aliases.
                    SelectItem::ExprWithAliases { .. } => Item::Wildcard,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => Item::Wildcard,
                })
                .collect(),
        ))
    }

    /// The names of `columns` result columns, `None` where DataFusion's
    /// name is right; `None` as a whole when the items cannot be lined up
    /// with the columns (more than one `*`).
    pub fn resolve(&self, columns: usize) -> Option<Vec<Option<String>>> {
        let wildcards = self
            .0
            .iter()
            .filter(|i| matches!(i, Item::Wildcard))
            .count();
        let named = self.0.len() - wildcards;
        if wildcards > 1 || named > columns || (wildcards == 0 && named != columns) {
            return None;
        }
        let mut names = Vec::with_capacity(columns);
        for item in &self.0 {
            match item {
                Item::Named(name) => names.push(Some(name.clone())),
                Item::Wildcard => names.extend(std::iter::repeat_n(None, columns - named)),
            }
        }
        Some(names)
    }
}

/// Whether `error` is DataFusion refusing a plan whose result has two
/// columns of one name (`SELECT 1 AS a, 2 AS a`; `SELECT t.c, n AS c
/// FROM t`).
pub fn is_duplicate_name(error: &datafusion::error::DataFusionError) -> bool {
    let message = error.to_string();
    message.contains("require unique expression names")
        || (message.contains("unqualified field name") && message.contains("ambiguous"))
}

/// Gives each expression of a query's select lists (of each side of a
/// UNION too) a name of its own, so that DataFusion plans a result with
/// two columns PostgreSQL names alike (`SELECT a, a`, `SELECT 1 AS x, 2 AS
/// x`); the result is then shown under the names [`ColumnNames`] read
/// before. `*` is left as it is.
pub fn name_each_column(statement: &mut Statement) {
    fn name_each(body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                for (n, item) in select.projection.iter_mut().enumerate() {
                    let alias = hidden_alias(n);
                    *item = match std::mem::replace(item, SelectItem::Wildcard(Default::default()))
                    {
                        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                            SelectItem::ExprWithAlias { expr, alias }
                        }
                        other => other,
                    };
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                name_each(left);
                name_each(right);
            }
            SetExpr::Query(query) => name_each(&mut query.body),
            _ => {}
        }
    }
    if let Statement::Query(query) = statement {
        name_each(&mut query.body);
    }
}

/// A schema with the given names on its fields (where a name is given).
pub fn rename(schema: &SchemaRef, names: &[Option<String>]) -> SchemaRef {
    let unchanged = (schema.fields().iter().zip(names))
        .all(|(field, name)| name.as_ref().is_none_or(|name| name == field.name()));
    if unchanged || names.len() != schema.fields().len() {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(names)
        .map(|(field, name)| match name {
            Some(name) => field.as_ref().clone().with_name(name),
            None => field.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str, columns: usize) -> Vec<String> {
        let statement = crate::sql::Session::parse(sql).unwrap().pop().unwrap();
        let datafusion::sql::parser::Statement::Statement(s) = statement else {
            panic!("not a statement")
        };
        ColumnNames::of(&s)
            .unwrap()
            .resolve(columns)
            .unwrap()
            .into_iter()
            .map(|n| n.unwrap_or_else(|| "<kept>".into()))
            .collect()
    }

    #[test]
    fn a_schema_renamed_to_its_own_names_is_itself() {
        use datafusion::arrow::datatypes::DataType;
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("owner", DataType::Utf8, true),
            Field::new("count(*)", DataType::Int64, false),
        ]));
        let same = rename(&schema, &[Some("owner".into()), None]);
        assert!(Arc::ptr_eq(&same, &schema));
        let renamed = rename(&schema, &[Some("owner".into()), Some("count".into())]);
        assert_eq!(renamed.field(1).name(), "count");
        assert_eq!(renamed.field(0).name(), "owner");
    }

    #[test]
    fn postgres_names() {
        assert_eq!(names("SELECT 1", 1), ["?column?"]);
        assert_eq!(
            names(
                "SELECT count(*), sum(t.v), max(v) AS top, 1 AS \"Top\" FROM t",
                4
            ),
            ["count", "sum", "top", "Top"]
        );
        assert_eq!(
            names(
                "SELECT x::text, 1::int, '2'::bigint, CAST(y AS varchar(3)) FROM t",
                4
            ),
            ["x", "int4", "int8", "y"]
        );
        assert_eq!(
            names(
                "SELECT a + 1, (b), CASE WHEN a THEN 1 END, pg_catalog.version() FROM t",
                4
            ),
            ["?column?", "b", "case", "version"]
        );
        assert_eq!(
            names("SELECT (SELECT max(x) FROM u), EXISTS (SELECT 1) FROM t", 2),
            ["max", "exists"]
        );
        assert_eq!(
            names("SELECT substr(s, 2), substring(s from 2) FROM t", 2),
            ["substr", "substring"]
        );
        assert_eq!(
            names("SELECT k, k AS __tablegate_column1 FROM t", 2),
            ["k", "k"]
        );
        assert_eq!(
            names("SELECT *, count(*) OVER () FROM t", 3),
            ["<kept>", "<kept>", "count"]
        );
        assert_eq!(names("SELECT 1 UNION SELECT 2", 1), ["?column?"]);
        assert_eq!(
            names("SELECT tags[1], '{a}'::text[], '{1}'::int[] FROM t", 3),
            ["tags", "text", "int4"]
        );
        assert_eq!(
            names(
                "SELECT t AT TIME ZONE 'UTC', date '2024-01-01', interval '1 day' FROM t",
                3
            ),
            ["timezone", "date", "interval"]
        );
    }
}
