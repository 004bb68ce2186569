//! Enum types: `CREATE TYPE ... AS ENUM`, `ALTER TYPE`, `DROP TYPE`, columns
//! of them, and casts to them.
//!
//! A value of an enum type is its label, held as text: columns of the type
//! are `text` columns whose writes must name one of the type's labels
//! ([`check_label`]), and a cast to the type (`'ok'::mood`, Prisma's
//! `CAST($1::text AS "Role")`) is the text, checked the same way
//! ([`rewrite_casts`], [`ENUM_INPUT`]), as is a text literal compared
//! for equality with such a column ([`check_labels_compared`]; a
//! parameter's value is checked by it once bound), and any
//! value a read by key compares with a key column of the type (the key
//! fast path's own check). ORDER BY such a column, and
//! `<`, `<=`, `>`, `>=` with one, follow the type's order, as in
//! PostgreSQL ([`in_label_order`]); other orderings of the values (`max`,
//! a window's ORDER BY, an expression of the column) are their texts'.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AlterType, AlterTypeAddValue, AlterTypeAddValuePosition, AlterTypeOperation,
    AlterTypeRenameValue, ArrayElemTypeDef, CastKind, DataType as AstType, Expr, ObjectName,
    Statement, UserDefinedTypeRepresentation, Value, VisitMut, VisitorMut,
};

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::logical_expr::{BinaryExpr, Expr as DfExpr, LogicalPlan, Operator, ScalarUDF};
use datafusion::prelude::lit;

use super::error::{Result, SqlError};
use super::plan_nodes::{inputs_schema, rewrite_nodes_holding};
use super::session::{normalize, table_name, Output, Session};
use super::types::ENUM_KEY;
use crate::catalog::{CatalogError, DefinitionChange, EnumType, EnumTypes, SqlType, TableDef};

/// `enum_input(text, type)`: the text, when it is a label of the enum type
/// named; 22P02 otherwise.
pub const ENUM_INPUT: &str = "enum_input";

/// Refuses a text that is not one of the type's labels, in PostgreSQL's
/// words.
pub fn check_label(ty: &EnumType, text: &str) -> Result<()> {
    match ty.holds(text) {
        true => Ok(()),
        false => Err(SqlError::value(
            "22P02",
            format!(
                "invalid input value for enum {}: \"{text}\"",
                shown(&ty.name)
            ),
        )),
    }
}

/// A type's name as PostgreSQL's messages show it: quoted as needed.
fn shown(name: &str) -> String {
    super::pg_catalog::quote_ident(name)
}

/// The enum type a type name in a statement names, if any.
fn named(types: &EnumTypes, ast: &AstType) -> Option<Arc<EnumType>> {
    let AstType::Custom(name, modifiers) = ast else {
        return None;
    };
    if !modifiers.is_empty() {
        return None;
    }
    types.get(&table_name(name).ok()?)
}

/// A column's type as declared: an enum type's columns hold text.
pub fn column_type(types: &EnumTypes, ast: &AstType) -> Result<(SqlType, Option<EnumType>)> {
    if let Some(ty) = named(types, ast) {
        return Ok((SqlType::Text, Some(ty.as_ref().clone())));
    }
    if let AstType::Array(
        ArrayElemTypeDef::SquareBracket(element, _) | ArrayElemTypeDef::AngleBracket(element),
    ) = ast
    {
        if let Some(ty) = named(types, element) {
            return Err(SqlError::FeatureNotSupported(format!(
                "arrays of enum type {} are not supported",
                ty.name
            )));
        }
    }
    Ok((super::types::sql_type(ast)?, None))
}

/// Writes each cast to an enum type as a check of its text
/// (`enum_input(CAST(x AS TEXT), 'mood')`), and each cast to an array of
/// one as a cast to `text[]`.
///
/// Definitions keep their casts as written (a column's DEFAULT, shown by
/// `\d` and pg_dump as given, is rewritten where it is used, by
/// [`super::rewrite::rewrite_expression`]).
pub fn rewrite_casts(statement: &mut Statement, types: &EnumTypes) {
    if types.is_empty()
        || matches!(
            statement,
            Statement::CreateTable(_) | Statement::AlterTable(_)
        )
    {
        return;
    }
    let _ = statement.visit(&mut Casts(types));
}

struct Casts<'a>(&'a EnumTypes);

impl VisitorMut for Casts<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(labels) = range_function(self.0, expr) {
            *expr = labels;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast {
            kind: CastKind::DoubleColon | CastKind::Cast,
            expr: inner,
            data_type,
            ..
        } = expr
        else {
            return ControlFlow::Continue(());
        };
        if let Some(ty) = named(self.0, data_type) {
            let text = Expr::Cast {
                kind: CastKind::Cast,
                expr: inner.clone(),
                data_type: AstType::Text,
                array: false,
                format: None,
            };
            let name = Expr::Value(Value::SingleQuotedString(ty.name.clone()).into());
            *expr = super::rewrite::call(ENUM_INPUT, vec![text, name]);
        } else if let AstType::Array(
            ArrayElemTypeDef::SquareBracket(element, _) | ArrayElemTypeDef::AngleBracket(element),
        ) = data_type
        {
            if named(self.0, element).is_some() {
                **element = AstType::Text;
            }
        }
        ControlFlow::Continue(())
    }
}

/// Refuses `ALTER COLUMN ... TYPE` to an enum type from a column that is
/// not text, without a `USING` (as PostgreSQL, which has no implicit cast
/// from text to an enum), with one other than the column cast to text or
/// to the type, or whose rows hold a text that is not one of its labels.
pub async fn check_retype(
    session: &Session,
    def: &TableDef,
    column: usize,
    using: Option<&Expr>,
    ty: &EnumType,
) -> Result<()> {
    let name = &def.columns[column].name;
    let text = matches!(
        def.columns[column].ty,
        SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_)
    );
    let Some(using) = using.filter(|_| text) else {
        let ty = shown(&ty.name);
        return Err(SqlError::value(
            "42804",
            format!("column \"{name}\" cannot be cast automatically to type {ty}"),
        )
        .explained(
            None,
            Some(format!("You might need to specify \"USING {name}::{ty}\".")),
        ));
    };
    if !casts_column(using, name) {
        return Err(SqlError::FeatureNotSupported(format!(
            "ALTER COLUMN TYPE {} USING {using} is not supported: USING may only name the \
             column, or cast it (USING {name}::text::{})",
            ty.name, ty.name
        )));
    }
    let labels: Vec<String> = ty
        .labels
        .iter()
        .map(|l| format!("'{}'", l.replace('\'', "''")))
        .collect();
    let quoted = super::dml::quote(name);
    let sql = format!(
        "SELECT {quoted} FROM {} WHERE {quoted} NOT IN ({}) LIMIT 1",
        super::dml::quote(&def.name),
        if labels.is_empty() {
            "NULL".into()
        } else {
            labels.join(", ")
        }
    );
    match session.query_text_rows(&sql).await?.first() {
        Some(text) => check_label(ty, text),
        None => Ok(()),
    }
}

/// Whether an expression is the column, cast any number of times
/// (`"role"::text::"Role"`; definitions keep their casts as written, see
/// [`rewrite_casts`]).
fn casts_column(expr: &Expr, column: &str) -> bool {
    match expr {
        Expr::Identifier(ident) => normalize(ident) == column,
        Expr::Nested(inner) | Expr::Cast { expr: inner, .. } => casts_column(inner, column),
        _ => false,
    }
}

/// `enum_position(label, type)`: the label's place among the type's
/// labels, from 1; 22P02 for a text that is not one.
pub const ENUM_POSITION: &str = "enum_position";

/// The enum type `args[1]` names and the label text `args[0]` (of
/// [`ENUM_INPUT`] and [`ENUM_POSITION`]); `None` for a NULL; 42704 for a
/// type that does not exist.
pub fn labelled(
    types: &EnumTypes,
    args: &[datafusion::common::ScalarValue],
) -> Result<Option<(Arc<EnumType>, String)>> {
    let text = |i: usize| args.get(i).and_then(super::functions::text);
    let (Some(label), Some(name)) = (text(0), text(1)) else {
        return Ok(None);
    };
    let ty = types.get(&name).ok_or(CatalogError::TypeNotFound(name))?;
    Ok(Some((ty, label)))
}

/// The place of a label in its type (see [`ENUM_POSITION`]).
pub fn position(ty: &EnumType, label: &str) -> Result<i32> {
    check_label(ty, label)?;
    Ok(ty
        .labels
        .iter()
        .position(|l| l == label)
        .map_or(0, |p| p as i32 + 1))
}

/// `enum_text(label)`: the label, a text like any other (a cast of an enum
/// column passes the column's field metadata on, [`ENUM_KEY`] with it).
pub const ENUM_TEXT: &str = "enum_text";

/// `plan` with enum values ordered as their types order them, not as
/// texts: the keys of an ORDER BY that are columns of an enum type, and
/// both sides of a comparison (`<`, `<=`, `>`, `>=`) one side of which is
/// such a column, become their labels' places (`position`, the session's
/// [`ENUM_POSITION`]). A cast of such a column (`m::text`) is of its text
/// (`text`, the session's [`ENUM_TEXT`]), ordered as a text.
pub fn in_label_order(
    plan: LogicalPlan,
    position: &Arc<ScalarUDF>,
    text: &Arc<ScalarUDF>,
) -> DfResult<LogicalPlan> {
    // Each pass's test looks at an expression's shape before it merges the
    // node's input schemas, which most expressions of a plan do not need.
    let cast_enum = |e: &DfExpr, schema: &DFSchema| match e {
        DfExpr::Cast(cast) => enum_of(&cast.expr, schema).is_some(),
        DfExpr::TryCast(cast) => enum_of(&cast.expr, schema).is_some(),
        _ => false,
    };
    let plan = rewrite_nodes_holding(
        plan,
        |node, e| {
            matches!(e, DfExpr::Cast(_) | DfExpr::TryCast(_)) && cast_enum(e, &inputs_schema(node))
        },
        |e, schema| {
            e.transform_up(|e| {
                if !cast_enum(&e, schema) {
                    return Ok(Transformed::no(e));
                }
                Ok(Transformed::yes(match e {
                    DfExpr::Cast(mut cast) => {
                        cast.expr = Box::new(text.call(vec![*cast.expr]));
                        DfExpr::Cast(cast)
                    }
                    DfExpr::TryCast(mut cast) => {
                        cast.expr = Box::new(text.call(vec![*cast.expr]));
                        DfExpr::TryCast(cast)
                    }
                    other => other,
                }))
            })
        },
    )?;
    let place_of = |e: DfExpr, ty: String| position.call(vec![e, lit(ty)]);
    let sorted = rewrite_nodes_holding(
        plan,
        |node, e| {
            matches!((node, e), (LogicalPlan::Sort(_), DfExpr::Column(_)))
                && enum_of(e, &inputs_schema(node)).is_some()
        },
        |e, schema| match enum_of(&e, schema) {
            Some(name) => Ok(Transformed::yes(place_of(e, name))),
            None => Ok(Transformed::no(e)),
        },
    )?;
    rewrite_nodes_holding(
        sorted,
        |node, e| {
            matches!(e, DfExpr::BinaryExpr(_))
                && compared_enum(e, &inputs_schema(node), &ORDERINGS).is_some()
        },
        |e, schema| {
            e.transform_up(|e| match compared_enum(&e, schema, &ORDERINGS) {
                Some(name) => {
                    let DfExpr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
                        unreachable!("a comparison");
                    };
                    Ok(Transformed::yes(DfExpr::BinaryExpr(BinaryExpr {
                        left: Box::new(place_of(*left, name.clone())),
                        op,
                        right: Box::new(place_of(*right, name)),
                    })))
                }
                None => Ok(Transformed::no(e)),
            })
        },
    )
}

/// Checks each text literal compared for equality with a column of an
/// enum type (`m = 'ok'`, `m <> 'ok'`, `m IN ('ok', 'sad')`) as a label
/// of that type, as PostgreSQL reads it: a text that is not a label is
/// refused (22P02) when the statement is planned, rather than matching
/// no row.
pub fn check_labels_compared(plan: &LogicalPlan, types: &EnumTypes) -> DfResult<()> {
    let check = |e: &DfExpr, name: &str| -> DfResult<()> {
        let DfExpr::Literal(value, _) = e else {
            return Ok(());
        };
        let Some(Some(text)) = value.try_as_str() else {
            return Ok(());
        };
        match types.get(name) {
            Some(ty) => Ok(check_label(&ty, text)?),
            None => Ok(()),
        }
    };
    plan.apply_with_subqueries(|node| {
        // The node's input schema, merged once for the node's comparisons.
        let mut schema = None;
        node.apply_expressions(|e| {
            e.apply(|e| {
                match e {
                    DfExpr::BinaryExpr(BinaryExpr { left, right, .. }) => {
                        let schema = schema.get_or_insert_with(|| inputs_schema(node));
                        if let Some(name) = compared_enum(e, schema, &EQUALITIES) {
                            check(left, &name)?;
                            check(right, &name)?;
                        }
                    }
                    DfExpr::InList(in_list) => {
                        let schema = schema.get_or_insert_with(|| inputs_schema(node));
                        if let Some(name) = enum_of(&in_list.expr, schema) {
                            for item in &in_list.list {
                                check(item, &name)?;
                            }
                        }
                    }
                    _ => {}
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok(())
}

/// The comparisons whose text is read as a label by
/// [`check_labels_compared`].
const EQUALITIES: [Operator; 4] = [
    Operator::Eq,
    Operator::NotEq,
    Operator::IsDistinctFrom,
    Operator::IsNotDistinctFrom,
];

/// The comparisons [`in_label_order`] orders by the type's order.
const ORDERINGS: [Operator; 4] = [Operator::Lt, Operator::LtEq, Operator::Gt, Operator::GtEq];

/// The enum type of a column reference, from its field's metadata.
fn enum_of(e: &DfExpr, schema: &DFSchema) -> Option<String> {
    let DfExpr::Column(column) = e else {
        return None;
    };
    let (_, field) = schema.qualified_field_from_column(column).ok()?;
    field.metadata().get(ENUM_KEY).cloned()
}

/// The enum type of a comparison by one of `operators` one side of which
/// is a column of that type.
fn compared_enum(e: &DfExpr, schema: &DFSchema, operators: &[Operator]) -> Option<String> {
    let DfExpr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return None;
    };
    if !operators.contains(op) {
        return None;
    }
    enum_of(left, schema).or_else(|| enum_of(right, schema))
}

/// `enum_first(x::mood)`, `enum_last(...)`, `enum_range(...)` and
/// `enum_range(low::mood, high::mood)` (bounds literals or NULL, NULL
/// being the type's end) as the label or the array of labels they give.
fn range_function(types: &EnumTypes, expr: &Expr) -> Option<Expr> {
    let Expr::Function(f) = expr else {
        return None;
    };
    let name = f.name.0.last()?.as_ident()?.value.to_ascii_lowercase();
    let cast_to = |e: &Expr| match e {
        Expr::Cast {
            kind: CastKind::DoubleColon | CastKind::Cast,
            expr,
            data_type,
            ..
        } => named(types, data_type).map(|ty| (ty, expr.as_ref().clone())),
        _ => None,
    };
    let label = |l: &str| Expr::Value(Value::SingleQuotedString(l.to_owned()).into());
    let array = |labels: &[String]| {
        Expr::Array(datafusion::sql::sqlparser::ast::Array {
            elem: labels.iter().map(|l| label(l)).collect(),
            named: true,
        })
    };
    // A bound's place: from the first label (`None`) or a label.
    let bound = |ty: &EnumType, e: Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::Null => Some(None),
            Value::SingleQuotedString(s) => ty.labels.iter().position(|l| l == s).map(Some),
            _ => None,
        },
        _ => None,
    };
    match (name.as_str(), super::rewrite::arguments(f).as_slice()) {
        ("enum_first", [arg]) => {
            cast_to(arg).and_then(|(ty, _)| ty.labels.first().map(|l| label(l)))
        }
        ("enum_last", [arg]) => cast_to(arg).and_then(|(ty, _)| ty.labels.last().map(|l| label(l))),
        ("enum_range", [arg]) => cast_to(arg).map(|(ty, _)| array(&ty.labels)),
        ("enum_range", [low, high]) => {
            let ((ty, low), (other, high)) = (cast_to(low)?, cast_to(high)?);
            if ty.name != other.name {
                return None;
            }
            let from = bound(&ty, low)?.unwrap_or(0);
            let to = bound(&ty, high)?.map_or(ty.labels.len(), |p| p + 1);
            Some(array(ty.labels.get(from..to.max(from)).unwrap_or(&[])))
        }
        _ => None,
    }
}

/// `CREATE TYPE name AS ENUM (labels)`.
pub async fn create(
    session: &Session,
    name: &ObjectName,
    representation: Option<&UserDefinedTypeRepresentation>,
) -> Result<Output> {
    let Some(UserDefinedTypeRepresentation::Enum { labels }) = representation else {
        return Err(SqlError::FeatureNotSupported(
            "CREATE TYPE makes enum types (AS ENUM) only".into(),
        ));
    };
    let name = table_name(name)?;
    if super::pg_catalog::type_oid(&name).is_some() {
        return Err(CatalogError::TypeExists(name).into());
    }
    let mut ty = EnumType {
        name,
        labels: Vec::with_capacity(labels.len()),
    };
    for label in labels {
        add_label(&mut ty, label.value.clone(), None)?;
    }
    session.engine().catalog.types.create(ty).await?;
    Ok(Output::Command("CREATE TYPE".into()))
}

/// Adds a label before or after another one (at the end without one);
/// refuses a label the type has and one too long.
fn add_label(
    ty: &mut EnumType,
    label: String,
    position: Option<&AlterTypeAddValuePosition>,
) -> Result<()> {
    if ty.holds(&label) {
        return Err(SqlError::value(
            "42710",
            format!("enum label \"{label}\" already exists"),
        ));
    }
    check_length(&label)?;
    let at = match position {
        None => ty.labels.len(),
        Some(AlterTypeAddValuePosition::Before(other)) => place(ty, &other.value)?,
        Some(AlterTypeAddValuePosition::After(other)) => place(ty, &other.value)? + 1,
    };
    ty.labels.insert(at, label);
    Ok(())
}

/// PostgreSQL's labels are at most 63 bytes (NAMEDATALEN - 1).
fn check_length(label: &str) -> Result<()> {
    if label.len() > 63 {
        return Err(
            SqlError::value("22023", format!("invalid enum label \"{label}\""))
                .explained(Some("Labels must be 63 bytes or less.".into()), None),
        );
    }
    Ok(())
}

fn place(ty: &EnumType, label: &str) -> Result<usize> {
    ty.labels.iter().position(|l| l == label).ok_or_else(|| {
        SqlError::value(
            "22023",
            format!("\"{label}\" is not an existing enum label"),
        )
    })
}

/// `ALTER TYPE name ADD VALUE / RENAME VALUE / RENAME TO`: the type
/// changes, and so do the copies of the tables whose columns have it.
pub async fn alter(session: &Session, alter: &AlterType) -> Result<Output> {
    let catalog = &session.engine().catalog;
    let name = table_name(&alter.name)?;
    let before = catalog
        .types
        .get(&name)
        .ok_or_else(|| CatalogError::TypeNotFound(name.clone()))?;
    let mut ty = before.as_ref().clone();
    match &alter.operation {
        AlterTypeOperation::AddValue(AlterTypeAddValue {
            if_not_exists: true,
            value,
            ..
        }) if ty.holds(&value.value) => {
            session.notice(format!(
                "enum label \"{}\" already exists, skipping",
                value.value
            ));
        }
        AlterTypeOperation::AddValue(AlterTypeAddValue {
            value, position, ..
        }) => add_label(&mut ty, value.value.clone(), position.as_ref())?,
        AlterTypeOperation::RenameValue(AlterTypeRenameValue { from, to }) => {
            let at = place(&ty, &from.value)?;
            if ty.holds(&to.value) {
                return Err(SqlError::value(
                    "42710",
                    format!("enum label \"{}\" already exists", to.value),
                ));
            }
            if !users(session, &name).is_empty() {
                return Err(SqlError::FeatureNotSupported(format!(
                    "RENAME VALUE of enum type {name}, which columns use: their rows hold the label's text; \
                     add the new label, UPDATE the rows and leave the old one"
                )));
            }
            check_length(&to.value)?;
            ty.labels[at] = to.value.clone();
        }
        AlterTypeOperation::Rename(rename) => {
            let new_name = normalize(&rename.new_name);
            if catalog.types.get(&new_name).is_some()
                || super::pg_catalog::type_oid(&new_name).is_some()
            {
                return Err(CatalogError::TypeExists(new_name).into());
            }
            ty.name = new_name;
        }
    }
    if ty == *before {
        return Ok(Output::Command("ALTER TYPE".into()));
    }
    catalog.types.replace(&name, ty.clone()).await?;
    let changes: Vec<DefinitionChange> = users(session, &name)
        .into_iter()
        .map(|def| {
            let mut after = def.as_ref().clone();
            for column in &mut after.columns {
                if column.enum_type.as_ref().is_some_and(|t| t.name == name) {
                    column.enum_type = Some(ty.clone());
                }
            }
            DefinitionChange::altered(def, after)
        })
        .collect();
    if !changes.is_empty() {
        catalog.commit(changes, Vec::new(), Vec::new()).await?;
    }
    Ok(Output::Command("ALTER TYPE".into()))
}

/// The type an `ALTER TYPE name OWNER TO role` names (which pg_dump
/// writes after each CREATE TYPE, and the parser does not read).
pub fn owner_change(sql: &str) -> Option<String> {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::{Span, Token, Tokenizer};
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let words: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF))
        .collect();
    let keyword = |t: &Token, k: &str| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    let (name, rest) = match words.as_slice() {
        [alter, ty, rest @ ..] if keyword(alter, "alter") && keyword(ty, "type") => match rest {
            [Token::Word(schema), Token::Period, Token::Word(name), rest @ ..]
                if normalize(&schema.to_ident(Span::empty())) == "public" =>
            {
                (name, rest)
            }
            [Token::Word(name), rest @ ..] => (name, rest),
            _ => return None,
        },
        _ => return None,
    };
    match rest {
        [owner, to, Token::Word(_)] if keyword(owner, "owner") && keyword(to, "to") => {
            Some(normalize(&name.to_ident(Span::empty())))
        }
        _ => None,
    }
}

/// `ALTER TYPE name OWNER TO role`: the type must exist; everything here
/// has one owner, so nothing changes (as with `ALTER SCHEMA public OWNER
/// TO`).
pub fn change_owner(session: &Session, sql: &str) -> Option<Result<Output>> {
    let name = owner_change(sql)?;
    if session.engine().catalog.types.get(&name).is_none() {
        return Some(Err(CatalogError::TypeNotFound(name).into()));
    }
    Some(Ok(Output::Command("ALTER TYPE".into())))
}

/// The tables with a column of the enum type.
fn users(session: &Session, name: &str) -> Vec<Arc<TableDef>> {
    session
        .engine()
        .catalog
        .list()
        .into_iter()
        .filter(|def| {
            def.columns
                .iter()
                .any(|c| c.enum_type.as_ref().is_some_and(|t| t.name == name))
        })
        .collect()
}

/// `DROP TYPE [IF EXISTS] names [CASCADE]`: refused while a column has
/// the type, as PostgreSQL refuses it without CASCADE (which would drop
/// the columns).
pub async fn drop(
    session: &Session,
    names: &[ObjectName],
    if_exists: bool,
    cascade: bool,
) -> Result<Output> {
    let catalog = &session.engine().catalog;
    let mut dropped = Vec::new();
    for name in names {
        let name = table_name(name)?;
        if catalog.types.get(&name).is_none() {
            if super::pg_catalog::type_oid(&name).is_some() {
                return Err(SqlError::value(
                    "2BP01",
                    format!(
                        "cannot drop type {name} because it is required by the database system"
                    ),
                ));
            }
            if if_exists {
                session.notice(format!("type \"{name}\" does not exist, skipping"));
                continue;
            }
            return Err(CatalogError::TypeNotFound(name).into());
        }
        if let Some(def) = users(session, &name).first() {
            let column = def
                .columns
                .iter()
                .find(|c| c.enum_type.as_ref().is_some_and(|t| t.name == name))
                .map_or("", |c| c.name.as_str());
            let detail = format!(
                "column {column} of table {} depends on type {}",
                def.name,
                shown(&name)
            );
            if cascade {
                return Err(SqlError::FeatureNotSupported(format!(
                    "DROP TYPE {name} CASCADE, which would drop the columns of the type ({detail}); \
                     drop them, or the tables, first"
                )));
            }
            return Err(SqlError::value(
                "2BP01",
                format!(
                    "cannot drop type {} because other objects depend on it",
                    shown(&name)
                ),
            )
            .explained(
                Some(detail),
                Some("Use DROP ... CASCADE to drop the dependent objects too.".into()),
            ));
        }
        dropped.push(name);
    }
    for name in dropped {
        catalog.types.drop(&name).await?;
    }
    Ok(Output::Command("DROP TYPE".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Ident;

    fn mood() -> EnumType {
        EnumType {
            name: "mood".into(),
            labels: vec!["sad".into(), "ok".into()],
        }
    }

    #[test]
    fn labels_go_before_after_or_last() {
        let mut ty = mood();
        add_label(&mut ty, "happy".into(), None).unwrap();
        let before = AlterTypeAddValuePosition::Before(Ident::new("ok"));
        add_label(&mut ty, "meh".into(), Some(&before)).unwrap();
        let after = AlterTypeAddValuePosition::After(Ident::new("happy"));
        add_label(&mut ty, "elated".into(), Some(&after)).unwrap();
        assert_eq!(ty.labels, ["sad", "meh", "ok", "happy", "elated"]);
        let err = add_label(&mut ty, "ok".into(), None).unwrap_err();
        assert_eq!(err.to_string(), "enum label \"ok\" already exists");
        let nowhere = AlterTypeAddValuePosition::After(Ident::new("nope"));
        let err = add_label(&mut ty, "x".into(), Some(&nowhere)).unwrap_err();
        assert_eq!(err.to_string(), "\"nope\" is not an existing enum label");
        assert!(add_label(&mut ty, "x".repeat(64), None).is_err());
    }

    #[test]
    fn owner_changes_are_read_by_their_words() {
        assert_eq!(
            owner_change("ALTER TYPE public.mood OWNER TO x;").as_deref(),
            Some("mood")
        );
        assert_eq!(
            owner_change("alter type \"Role\" owner to tablegate").as_deref(),
            Some("Role")
        );
        assert_eq!(owner_change("ALTER TYPE mood ADD VALUE 'x'"), None);
        assert_eq!(owner_change("ALTER TYPE other.mood OWNER TO x"), None);
    }

    #[test]
    fn a_write_names_a_label() {
        assert!(check_label(&mood(), "ok").is_ok());
        let err = check_label(&mood(), "OK").unwrap_err();
        assert_eq!(err.to_string(), "invalid input value for enum mood: \"OK\"");
    }
}
