//! PostgreSQL arrays as Arrow lists: their text form (`{a,"b c",NULL}`),
//! read from a literal, a parameter or a COPY field and written for a
//! client or a cast to text; and the JSON array an array column's value is
//! stored as (`["a","b c",null]`, `[1,2]`), which other readers of the
//! table can read too.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, ListArray, ListBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::{cast, cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DFResult, ScalarValue};
use datafusion::functions_nested::expr_fn::{array_has_all, array_has_any};
use datafusion::logical_expr::expr::{Cast, Placeholder};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use super::error::{Result, SqlError};
use super::plan_nodes::rewrite_nodes_holding;
use super::time_zone::SessionZone;
use super::types::list_of;
use crate::catalog::{Element, SqlType};

/// The type id of arrays of `element` (`_text` for text).
pub fn type_oid(element: Element) -> u32 {
    super::pg_catalog::type_info(SqlType::Array(element)).0 as u32
}

/// The type id of arrays of the type of id `element`, if there is one.
pub fn array_type_oid(element: u32) -> Option<u32> {
    super::pg_catalog::array_of(element as i32).map(|array| array as u32)
}

fn malformed(text: &str, why: &str) -> SqlError {
    SqlError::value(
        "22P02",
        format!("malformed array literal: {text:?} ({why})"),
    )
}

/// The elements of an array's text form, as PostgreSQL's `array_in` reads
/// them: `{}` is empty, an element is quoted (`"a,b"`) or not (white space
/// around it dropped), a backslash takes the next character as it is, and
/// an unquoted `NULL` is NULL. Arrays of arrays are refused.
pub fn parse_literal(text: &str) -> Result<Vec<Option<String>>> {
    let body = text.trim();
    if body.starts_with('[') {
        return Err(malformed(text, "dimensions are not supported"));
    }
    let Some(body) = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else {
        return Err(malformed(
            text,
            "it must start with \"{\" and end with \"}\"",
        ));
    };
    let mut elements = Vec::new();
    if body.trim().is_empty() {
        return Ok(elements);
    }
    let mut chars = body.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut element = String::new();
        let mut quoted = false;
        // Whether a character was quoted or escaped: such an element is
        // never NULL, and white space up to its last such character stays.
        let mut taken = false;
        let mut kept_to = 0;
        while let Some(&c) = chars.peek() {
            match c {
                '"' => {
                    chars.next();
                    quoted = !quoted;
                    taken = true;
                    kept_to = element.len();
                }
                '\\' => {
                    chars.next();
                    let escaped = chars
                        .next()
                        .ok_or_else(|| malformed(text, "it ends after a backslash"))?;
                    element.push(escaped);
                    taken = true;
                    kept_to = element.len();
                }
                '{' | '}' if !quoted => {
                    return Err(malformed(text, "arrays of arrays are not supported"))
                }
                ',' if !quoted => break,
                c => {
                    chars.next();
                    element.push(c);
                    if quoted {
                        kept_to = element.len();
                    }
                }
            }
        }
        if quoted {
            return Err(malformed(text, "a quote is not closed"));
        }
        let trimmed = element[kept_to..].trim_end().len();
        element.truncate(kept_to + trimmed);
        if element.is_empty() && !taken {
            return Err(malformed(text, "an element is empty"));
        }
        let null = !taken && element.eq_ignore_ascii_case("NULL");
        elements.push((!null).then_some(element));
        if chars.next().is_none() {
            return Ok(elements);
        }
    }
}

/// Texts in array form as lists of `element`, each element's text read as
/// a text cast to it is (see [`super::types::text_inputs`]).
pub fn texts_to_lists(
    texts: &StringArray,
    element: &DataType,
    zone: &SessionZone,
) -> Result<ArrayRef> {
    let mut lists = ListBuilder::new(StringBuilder::new());
    for text in texts {
        match text {
            Some(text) => {
                for element in parse_literal(text)? {
                    lists.values().append_option(element);
                }
                lists.append(true);
            }
            None => lists.append(false),
        }
    }
    let (_, offsets, values, nulls) = lists.finish().into_parts();
    let values = super::types::text_inputs(&values, element, zone)?;
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    Ok(Arc::new(ListArray::try_new(field, offsets, values, nulls)?))
}

/// Appends an array's text form with these elements' texts, quoting an
/// element as PostgreSQL's `array_out` does: when it is empty, reads as
/// NULL, or holds a quote, backslash, brace, comma or white space.
fn put_literal<'a>(elements: impl Iterator<Item = Option<&'a str>>, out: &mut String) {
    out.push('{');
    for (i, element) in elements.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let Some(element) = element else {
            out.push_str("NULL");
            continue;
        };
        let quoted = element.is_empty()
            || element.eq_ignore_ascii_case("NULL")
            || element
                .chars()
                .any(|c| matches!(c, '"' | '\\' | '{' | '}' | ',') || c.is_ascii_whitespace());
        if !quoted {
            out.push_str(element);
            continue;
        }
        out.push('"');
        for c in element.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
}

/// Each value's text as PostgreSQL writes it (see `casts`: floats in
/// their shortest digits, numerics at their scale, timestamps with a
/// space, instants in `zone`, booleans as `t` and `f`, bytes in hex).
pub fn value_texts(values: &ArrayRef, zone: &SessionZone) -> Result<ArrayRef> {
    Ok(match values.data_type() {
        DataType::Float64 | DataType::Float32 => super::casts::float_texts(values)?,
        DataType::Boolean => Arc::new(
            values
                .as_boolean()
                .iter()
                .map(|b| b.map(|b| if b { "t" } else { "f" }))
                .collect::<StringArray>(),
        ),
        DataType::Decimal128(..) => super::decimals::decimal_texts(values)?,
        DataType::Timestamp(..) => super::casts::timestamp_texts(values, zone)?,
        DataType::List(_) => list_texts(values, zone)?,
        DataType::Binary => Arc::new(
            values
                .as_binary::<i32>()
                .iter()
                .map(|b| {
                    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                    b.map(|b| format!("\\x{}", hex(b)))
                })
                .collect::<StringArray>(),
        ),
        _ => cast(values, &DataType::Utf8)?,
    })
}

/// Each list's text as an `int2vector` or an `oidvector` (`indkey`) is
/// written: its numbers between spaces (`1 2`), where an array is `{1,2}`.
pub fn vector_texts(lists: &ArrayRef) -> Result<ArrayRef> {
    let Some(lists) = lists.as_list_opt::<i32>() else {
        return Err(SqlError::value(
            "42804",
            format!("{} is not a vector", lists.data_type()),
        ));
    };
    let mut texts = StringBuilder::with_capacity(lists.len(), 8 * lists.len());
    for row in 0..lists.len() {
        if lists.is_null(row) {
            texts.append_null();
            continue;
        }
        let numbers = value_texts(&lists.value(row), &SessionZone::utc())?;
        let numbers = numbers.as_string::<i32>();
        let numbers: Vec<&str> = numbers.iter().flatten().collect();
        texts.append_value(numbers.join(" "));
    }
    Ok(Arc::new(texts.finish()))
}

/// Each list's text form (`tags::text`), its instants in `zone`.
pub fn list_texts(lists: &ArrayRef, zone: &SessionZone) -> Result<ArrayRef> {
    let Some(lists) = lists.as_list_opt::<i32>() else {
        return Err(SqlError::value(
            "42804",
            format!("{} is not an array", lists.data_type()),
        ));
    };
    // Only the elements of these lists: a slice of a list array (one row
    // of it, as a client is sent) keeps all of the array's values.
    let offsets = lists.value_offsets();
    let first = offsets[0] as usize;
    let used = offsets[lists.len()] as usize - first;
    let elements = value_texts(&lists.values().slice(first, used), zone)?;
    let elements = elements.as_string::<i32>();
    let nested = matches!(lists.value_type(), DataType::List(_));
    let mut texts = StringBuilder::with_capacity(lists.len(), elements.value_data().len() + 2);
    let mut text = String::new();
    for row in 0..lists.len() {
        if lists.is_null(row) {
            texts.append_null();
            continue;
        }
        text.clear();
        let range = offsets[row] as usize - first..offsets[row + 1] as usize - first;
        let items = range.map(|i| elements.is_valid(i).then(|| elements.value(i)));
        if nested {
            // An inner array is written as it is: `{{1,2},{3,4}}`.
            text.push('{');
            let items: Vec<&str> = items.map(|item| item.unwrap_or("NULL")).collect();
            text.push_str(&items.join(","));
            text.push('}');
        } else {
            put_literal(items, &mut text);
        }
        texts.append_value(&text);
    }
    Ok(Arc::new(texts.finish()))
}

/// The JSON array one stored array is: numbers and booleans as JSON's,
/// every other element as a string (`["2026-01-01T10:00:00", null]`),
/// each in the text Arrow reads back.
pub fn stored_json(values: &ArrayRef) -> Result<String> {
    use serde_json::Value as Json;
    let texts = cast(values, &DataType::Utf8)?;
    let texts = texts.as_string::<i32>();
    let numbers = values.data_type().is_numeric();
    let booleans = values.data_type() == &DataType::Boolean;
    let elements: Vec<Json> = texts
        .iter()
        .map(|text| match text {
            None => Json::Null,
            Some(text) if booleans => Json::Bool(text == "true"),
            Some(text) if numbers => serde_json::from_str::<serde_json::Number>(text)
                .map_or_else(|_| Json::from(text), Json::Number),
            Some(text) => Json::from(text),
        })
        .collect();
    Ok(Json::Array(elements).to_string())
}

/// Stored arrays (see [`stored_json`]) being collected into a list column.
pub struct StoredLists {
    lists: ListBuilder<StringBuilder>,
    target: DataType,
    /// The first stored value that was not an array of scalars.
    bad: Option<String>,
}

impl StoredLists {
    pub fn new(target: DataType, capacity: usize) -> Self {
        StoredLists {
            lists: ListBuilder::with_capacity(StringBuilder::new(), capacity),
            target,
            bad: None,
        }
    }

    pub fn append(&mut self, json: Option<&str>) {
        use serde_json::Value as Json;
        let Some(json) = json else {
            self.lists.append(false);
            return;
        };
        let elements = match serde_json::from_str::<Vec<Json>>(json) {
            Ok(elements) => elements,
            Err(_) => {
                self.bad.get_or_insert_with(|| json.to_owned());
                self.lists.append(false);
                return;
            }
        };
        for element in elements {
            match element {
                Json::Null => self.lists.values().append_null(),
                Json::String(text) => self.lists.values().append_value(text),
                Json::Bool(b) => self.lists.values().append_value(b.to_string()),
                Json::Number(n) => self.lists.values().append_value(n.to_string()),
                other => {
                    self.bad.get_or_insert_with(|| other.to_string());
                    self.lists.values().append_null();
                }
            }
        }
        self.lists.append(true);
    }

    pub fn finish(mut self) -> Result<ArrayRef> {
        if let Some(bad) = self.bad {
            return Err(SqlError::value(
                "XX001",
                format!("stored array {bad:?} is not a JSON array of scalars"),
            ));
        }
        let texts: ArrayRef = Arc::new(self.lists.finish());
        let strict = CastOptions {
            safe: false,
            ..Default::default()
        };
        Ok(cast_with_options(&texts, &self.target, &strict)?)
    }
}

/// Plans an operator between an array and a text literal as PostgreSQL
/// types an untyped literal, by what it meets: the literal is the array's
/// type, read from its text form (see `casts`). DataFusion finds no common
/// type for `List(Utf8)` and `Utf8` (`tags = '{a,b}'`) and leaves `@>`
/// of a non-array unplanned (`tags @> '{a}'`); a parameter is given the
/// array's type (`tags @> $1`). Also plans `&&`, the arrays overlap.
#[derive(Debug)]
pub struct ArrayOperators;

impl ExprPlanner for ArrayOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DFResult<PlannerResult<RawBinaryExpr>> {
        let RawBinaryExpr { op, left, right } = expr;
        use BinaryOperator::*;
        if !matches!(
            op,
            Eq | NotEq | Lt | LtEq | Gt | GtEq | AtArrow | ArrowAt | PGOverlap
        ) {
            return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right }));
        }
        let list_type = |e: &Expr| {
            e.get_type(schema)
                .ok()
                .filter(|t| matches!(t, DataType::List(_)))
        };
        let Some(ty) = list_type(&left).or_else(|| list_type(&right)) else {
            return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right }));
        };
        // A parameter of no type yet is one of the array's too.
        let typed = |e: Expr| match e {
            Expr::Literal(ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)), _) => {
                Expr::Cast(Cast::new(Box::new(e), ty.clone()))
            }
            Expr::Placeholder(Placeholder { id, field: None }) => {
                let field = Arc::new(Field::new(&id, ty.clone(), true));
                Expr::Placeholder(Placeholder::new_with_field(id, Some(field)))
            }
            e => e,
        };
        let (left, right) = (typed(left), typed(right));
        Ok(match op {
            AtArrow => PlannerResult::Planned(array_has_all(left, right)),
            ArrowAt => PlannerResult::Planned(array_has_all(right, left)),
            PGOverlap => PlannerResult::Planned(array_has_any(left, right)),
            op => PlannerResult::Original(RawBinaryExpr { op, left, right }),
        })
    }
}

/// `x = ANY($1)`: the parameter an array of `x`'s type. DataFusion plans
/// it as `array_has($1, x)` and infers no type for `$1` there, so a list a
/// client sends (psycopg's `id = ANY(%s)`) had no type to be read as.
pub fn typed_any_parameters(plan: LogicalPlan) -> DFResult<LogicalPlan> {
    let untyped_any = |_: &LogicalPlan, e: &Expr| match e {
        Expr::ScalarFunction(f) => {
            f.name() == "array_has"
                && matches!(
                    f.args.first(),
                    Some(Expr::Placeholder(Placeholder { field: None, .. }))
                )
        }
        _ => false,
    };
    rewrite_nodes_holding(plan, untyped_any, |e, inputs| {
        e.transform_up(|e| match e {
            Expr::ScalarFunction(mut f) if f.name() == "array_has" => {
                let element = f.args.get(1).and_then(|x| x.get_type(inputs).ok());
                match (f.args.first_mut(), element) {
                    (Some(Expr::Placeholder(p)), Some(element)) if p.field.is_none() => {
                        p.field = Some(Arc::new(Field::new(&p.id, list_of(element), true)));
                        Ok(Transformed::yes(Expr::ScalarFunction(f)))
                    }
                    _ => Ok(Transformed::no(Expr::ScalarFunction(f))),
                }
            }
            e => Ok(Transformed::no(e)),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Float64Type;

    fn parsed(text: &str) -> Vec<Option<String>> {
        parse_literal(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn some(texts: &[&str]) -> Vec<Option<String>> {
        texts.iter().map(|t| Some((*t).to_owned())).collect()
    }

    #[test]
    fn literals_read_as_postgres_reads_them() {
        assert_eq!(parsed("{}"), Vec::<Option<String>>::new());
        assert_eq!(parsed(" { } "), Vec::<Option<String>>::new());
        assert_eq!(parsed("{a,b}"), some(&["a", "b"]));
        assert_eq!(parsed("{ a b , c }"), some(&["a b", "c"]));
        assert_eq!(
            parsed(r#"{"a,b"," x ","",NULL,"NULL",null}"#),
            vec![
                Some("a,b".into()),
                Some(" x ".into()),
                Some("".into()),
                None,
                Some("NULL".into()),
                None
            ]
        );
        assert_eq!(parsed(r#"{"q\"x",b\,c,\ }"#), some(&["q\"x", "b,c", " "]));
        for bad in [
            "a,b",
            "{a",
            "{{1,2},{3,4}}",
            r#"{"a}"#,
            "{a,,b}",
            "[1:2]={1,2}",
        ] {
            assert!(parse_literal(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn texts_are_written_as_postgres_writes_them_and_read_back() {
        let texts = [
            Some("a"),
            Some(""),
            Some("NULL"),
            None,
            Some("x\"y"),
            Some("p,q"),
            Some(r"r\s"),
            Some("a b"),
        ];
        let mut out = String::new();
        put_literal(texts.into_iter(), &mut out);
        assert_eq!(out, r#"{a,"","NULL",NULL,"x\"y","p,q","r\\s","a b"}"#);
        let read = parsed(&out);
        let written: Vec<Option<String>> = texts.iter().map(|t| t.map(str::to_owned)).collect();
        assert_eq!(read, written);
    }

    #[test]
    fn a_slice_of_lists_is_written_from_its_own_elements() {
        let texts = StringArray::from(vec![
            Some("{a,b}"),
            None,
            Some("{\"c d\",NULL}"),
            Some("{}"),
        ]);
        let lists = texts_to_lists(&texts, &DataType::Utf8, &SessionZone::utc()).unwrap();
        let written = |lists: &ArrayRef| {
            let texts = list_texts(lists, &SessionZone::utc()).unwrap();
            texts
                .as_string::<i32>()
                .iter()
                .map(|t| t.map(str::to_owned))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            written(&lists),
            [
                Some("{a,b}".into()),
                None,
                Some("{\"c d\",NULL}".into()),
                Some("{}".into())
            ]
        );
        assert_eq!(
            written(&lists.slice(2, 1)),
            [Some("{\"c d\",NULL}".to_owned())]
        );
        assert_eq!(
            written(&lists.slice(1, 3)),
            [None, Some("{\"c d\",NULL}".into()), Some("{}".into())]
        );
    }

    #[test]
    fn stored_arrays_read_back_as_their_type() {
        let ints: ArrayRef = Arc::new(datafusion::arrow::array::Int32Array::from(vec![
            Some(1),
            None,
            Some(-3),
        ]));
        let json = stored_json(&ints).unwrap();
        assert_eq!(json, "[1,null,-3]");
        let floats: ArrayRef = Arc::new(datafusion::arrow::array::Float64Array::from(vec![
            1.5,
            f64::NAN,
            1e20,
        ]));
        let json_floats = stored_json(&floats).unwrap();
        let target = super::super::types::list_of(DataType::Int32);
        let mut lists = StoredLists::new(target.clone(), 2);
        lists.append(Some(&json));
        lists.append(None);
        let read = lists.finish().unwrap();
        assert_eq!(read.data_type(), &target);
        let read = read.as_list::<i32>();
        assert!(read.is_null(1));
        assert_eq!(read.value(0).as_ref(), ints.as_ref());
        let mut lists = StoredLists::new(super::super::types::list_of(DataType::Float64), 1);
        lists.append(Some(&json_floats));
        let read = lists.finish().unwrap();
        let read = read.as_list::<i32>().value(0);
        let read = read.as_primitive::<Float64Type>();
        assert_eq!(read.value(0), 1.5);
        assert!(read.value(1).is_nan());
        assert_eq!(read.value(2), 1e20);
        let mut lists = StoredLists::new(super::super::types::list_of(DataType::Int32), 1);
        lists.append(Some("{\"a\":1}"));
        assert!(lists.finish().is_err());
    }
}
