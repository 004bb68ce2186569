//! PostgreSQL's JSON operators and functions over JSON held as text (how
//! `json` and `jsonb` columns read): `doc -> 'key'`, `doc ->> 'key'`,
//! `doc -> 0` (an array's element, from the end when negative), `doc #>
//! '{a,0}'` and `doc #>> '{a,0}'` (by path); `json_extract_path[_text]`,
//! `json_array_length` and `json_typeof`, each also as `jsonb_...`. The
//! rewrite (`super::rewrite`) makes the operators calls of these functions.
//! `doc @> other`, `doc <@ other`, `doc ? 'key'`, `doc ?| array[...]` and
//! `doc ?& array[...]` are planned by [`JsonOperators`] as calls of
//! [`contains`] and [`has_keys`] when the JSON side is text, `jsonb`'s
//! `||` and `-` as calls of [`concat`] and [`delete`].
//! A JSON value is written as `jsonb` prints it: `{"a": 1, "b": [1, 2]}`,
//! an object's keys shorter first, then in byte order.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef, TimeUnit};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use serde_json::Value;

use super::decimals::{put_decimal, without_exponent};
use super::floats::put_float;
use super::functions::{each_row, text as text_of, text_list};
use super::types::{declared_type, push_json_timestamp, text_field};
use super::SqlError;
use crate::catalog::SqlType;

/// The function each operator becomes.
pub const GET: &str = "json_get";
pub const GET_TEXT: &str = "json_get_text";
pub const GET_PATH: &str = "json_get_path";
pub const GET_PATH_TEXT: &str = "json_get_path_text";
/// What `json_agg(x ...)` becomes around `array_agg(x ...)`.
pub const ARRAY_OF: &str = "json_array_of";
/// What `@>` and `<@` become (the container first).
pub const CONTAINS: &str = "json_contains";
/// What `?` and `?|` become, and `?&`.
pub const HAS_ANY_KEY: &str = "json_has_any_key";
pub const HAS_ALL_KEYS: &str = "json_has_all_keys";

/// The most digits a jsonb number written with an exponent is written out
/// in; one with more keeps its exponent.
const JSONB_NUMBER_DIGITS: usize = 1000;

/// A value as JSON: numbers, booleans and NULL as such, lists as arrays,
/// structs as objects, anything else as its text.
pub fn to_json(value: &ScalarValue) -> Value {
    use datafusion::arrow::array::Array;
    if value.is_null() {
        return Value::Null;
    }
    let number = |n: f64| serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number);
    match value {
        ScalarValue::Boolean(Some(b)) => Value::Bool(*b),
        ScalarValue::Int8(Some(n)) => Value::from(*n),
        ScalarValue::Int16(Some(n)) => Value::from(*n),
        ScalarValue::Int32(Some(n)) => Value::from(*n),
        ScalarValue::Int64(Some(n)) => Value::from(*n),
        ScalarValue::UInt8(Some(n)) => Value::from(*n),
        ScalarValue::UInt16(Some(n)) => Value::from(*n),
        ScalarValue::UInt32(Some(n)) => Value::from(*n),
        ScalarValue::UInt64(Some(n)) => Value::from(*n),
        ScalarValue::Float32(Some(n)) => number(f64::from(*n)),
        ScalarValue::Float64(Some(n)) => number(*n),
        ScalarValue::Decimal128(Some(_), ..) => value
            .to_string()
            .parse::<serde_json::Number>()
            .map_or(Value::Null, Value::Number),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => Value::String(s.clone()),
        ScalarValue::List(list) => {
            let items = list.value(0);
            let item =
                |i| ScalarValue::try_from_array(&items, i).map_or(Value::Null, |v| to_json(&v));
            Value::Array((0..items.len()).map(item).collect())
        }
        // As PostgreSQL writes a timestamp into JSON: ISO 8601's `T`
        // between date and time, a zoned one's offset in full. (A date's
        // text is already ISO 8601's.)
        ScalarValue::TimestampSecond(Some(_), zone)
        | ScalarValue::TimestampMillisecond(Some(_), zone)
        | ScalarValue::TimestampMicrosecond(Some(_), zone)
        | ScalarValue::TimestampNanosecond(Some(_), zone) => {
            let micros = match value.cast_to(&DataType::Timestamp(TimeUnit::Microsecond, None)) {
                Ok(ScalarValue::TimestampMicrosecond(Some(micros), _)) => Some(micros),
                _ => None,
            };
            match micros {
                Some(micros) => {
                    let mut text = String::new();
                    push_json_timestamp(&mut text, micros, zone.is_some());
                    Value::String(text)
                }
                None => Value::String(value.to_string()),
            }
        }
        other => Value::String(other.to_string()),
    }
}

/// `json_build_object`, `json_build_array` and their `jsonb_` twins: JSON
/// made of any number of values, each as [`member_text`] writes it. An
/// object is written `{"a" : 1, "b" : "x"}` as `json`, `{"a": 1, "b": "x"}`
/// as `jsonb` (its keys in jsonb's order, a repeated key's last value).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JsonBuild {
    name: &'static str,
    shape: Shape,
    jsonb: bool,
    signature: Signature,
}

/// What a [`JsonBuild`] makes of its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shape {
    /// `json_build_object`: keys and values, in turn.
    Object,
    /// `json_build_array`.
    Array,
    /// `to_json`: its one argument as JSON (NULL for NULL).
    Value,
    /// `json_agg`'s element: `to_json`'s text, marked with [`STRUCTURED`]
    /// when the value is a row or an array.
    Element,
    /// `row_to_json(row [, pretty])`: a row as an object, its fields on
    /// lines of their own when `pretty`.
    Row,
}

impl JsonBuild {
    pub fn all() -> [JsonBuild; 9] {
        let build = |name, shape, jsonb| JsonBuild {
            name,
            shape,
            jsonb,
            signature: match shape {
                Shape::Value | Shape::Element => Signature::any(1, Volatility::Stable),
                Shape::Row => Signature::one_of(
                    vec![TypeSignature::Any(1), TypeSignature::Any(2)],
                    Volatility::Stable,
                ),
                _ => Signature::one_of(
                    vec![TypeSignature::Nullary, TypeSignature::VariadicAny],
                    Volatility::Stable,
                ),
            },
        };
        [
            build("json_build_object", Shape::Object, false),
            build("jsonb_build_object", Shape::Object, true),
            build("json_build_array", Shape::Array, false),
            build("jsonb_build_array", Shape::Array, true),
            build("to_json", Shape::Value, false),
            build("to_jsonb", Shape::Value, true),
            build("array_to_json", Shape::Value, false),
            build("row_to_json", Shape::Row, false),
            build(AGGREGATED_ELEMENT, Shape::Element, false),
        ]
    }

    fn build(&self, values: &[ScalarValue], kinds: &[Option<SqlType>]) -> Result<Option<String>> {
        let members = values
            .iter()
            .zip(kinds)
            .map(|(value, kind)| member_text(value, *kind, self.jsonb));
        match self.shape {
            Shape::Value if values[0].is_null() => return Ok(None),
            Shape::Value => return member_text(&values[0], kinds[0], self.jsonb).map(Some),
            Shape::Element if values[0].is_null() => return Ok(None),
            Shape::Element => {
                let text = member_text(&values[0], kinds[0], false)?;
                return Ok(Some(match &values[0] {
                    ScalarValue::Struct(_) | ScalarValue::List(_) => format!("{STRUCTURED}{text}"),
                    _ => text,
                }));
            }
            // NULL, or a NULL row (planning refused anything else).
            Shape::Row => {
                let ScalarValue::Struct(row) = &values[0] else {
                    return Ok(None);
                };
                if values[0].is_null() {
                    return Ok(None);
                }
                let pretty = matches!(values.get(1), Some(ScalarValue::Boolean(Some(true))));
                return row_text(row, false, if pretty { ",\n " } else { "," }).map(Some);
            }
            Shape::Array => {
                let members = members.collect::<Result<Vec<_>>>()?;
                return Ok(Some(format!("[{}]", members.join(", "))));
            }
            Shape::Object => {}
        }
        if values.len() % 2 != 0 {
            return invalid_value("argument list must have even number of elements");
        }
        let mut pairs = Vec::with_capacity(values.len() / 2);
        for (i, pair) in values.chunks(2).enumerate() {
            let Some(key) = text_of(&pair[0]) else {
                return Err(SqlError::value(
                    "22004",
                    format!("argument {} cannot be null", 2 * i + 1),
                )
                .into());
            };
            pairs.push((key, member_text(&pair[1], kinds[2 * i + 1], self.jsonb)?));
        }
        let separator = if self.jsonb {
            // jsonb keeps a key's last value, and its keys shorter first.
            pairs.reverse();
            let mut seen = std::collections::HashSet::new();
            pairs.retain(|(key, _)| seen.insert(key.clone()));
            pairs.sort_by(|(a, _), (b, _)| jsonb_key_order(a, b));
            ": "
        } else {
            " : "
        };
        let pairs: Vec<String> = pairs
            .into_iter()
            .map(|(key, value)| format!("{}{separator}{value}", Value::String(key)))
            .collect();
        Ok(Some(format!("{{{}}}", pairs.join(", "))))
    }
}

impl ScalarUDFImpl for JsonBuild {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if let (Shape::Row, Some(row)) = (self.shape, args.arg_fields.first()) {
            if !matches!(row.data_type(), DataType::Struct(_) | DataType::Null) {
                let ty = super::ddl::type_of_field(row)
                    .map_or_else(|_| row.data_type().to_string(), |ty| ty.pg_name());
                return Err(SqlError::value(
                    "42883",
                    format!("function row_to_json({ty}) does not exist"),
                )
                .into());
            }
        }
        Ok(json_field(self.name, self.jsonb))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let kinds: Vec<Option<SqlType>> =
            args.arg_fields.iter().map(|f| declared_type(f)).collect();
        each_row(&args, &DataType::Utf8, false, |values| {
            self.build(values, &kinds).map(ScalarValue::Utf8)
        })
    }
}

/// What a cast to `json` and to `jsonb` become.
pub const TO_JSON: &str = "json_input";
pub const TO_JSONB: &str = "jsonb_input";

/// A cast to `json` or `jsonb`: the text checked to be JSON (22P02 if it
/// is not), and as `jsonb` written as jsonb prints it.
pub fn input(args: &[ScalarValue], jsonb: bool) -> Result<ScalarValue> {
    Ok(utf8(match document(&args[0])? {
        None => None,
        Some(_) if !jsonb => text_of(&args[0]),
        Some(doc) => Some(jsonb_text(&doc)),
    }))
}

/// A result column holding `json` (or `jsonb`) as text.
pub fn json_field(name: &str, jsonb: bool) -> FieldRef {
    text_field(name, if jsonb { SqlType::Jsonb } else { SqlType::Json })
}

/// A value as it goes into JSON that a function builds: JSON (a value of
/// a `json` or `jsonb` column or cast) as itself, a number as PostgreSQL
/// prints it (a numeric with its scale), a list as an array, text as a
/// string, NULL as `null`.
fn member_text(value: &ScalarValue, declared: Option<SqlType>, jsonb: bool) -> Result<String> {
    if value.is_null() {
        return Ok("null".into());
    }
    match declared {
        // JSON built as jsonb is written as jsonb prints it (a jsonb value
        // held before jsonb was normalized on writing too).
        Some(SqlType::Json | SqlType::Jsonb) if jsonb || declared == Some(SqlType::Jsonb) => {
            return Ok(document(value)?
                .map(|doc| jsonb_text(&doc))
                .unwrap_or_default())
        }
        Some(SqlType::Json) => return Ok(text_of(value).unwrap_or_default()),
        _ => {}
    }
    let mut out = bytes::BytesMut::new();
    match value {
        ScalarValue::Decimal128(Some(mantissa), precision, scale) => {
            put_decimal(*mantissa, *precision, *scale, &mut out)
        }
        ScalarValue::Float64(Some(v)) if v.is_finite() => put_float(*v, &mut out),
        ScalarValue::Float32(Some(v)) if v.is_finite() => put_float(*v, &mut out),
        ScalarValue::Struct(row) => return row_text(row, jsonb, ","),
        ScalarValue::List(list) => {
            let items = list.value(0);
            let members = (0..items.len())
                .map(|i| member_text(&ScalarValue::try_from_array(&items, i)?, None, jsonb))
                .collect::<Result<Vec<_>>>()?;
            // An array goes into json as `array_to_json` writes it.
            let separator = if jsonb { ", " } else { "," };
            return Ok(format!("[{}]", members.join(separator)));
        }
        other => return Ok(to_json(other).to_string()),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A row as a JSON object of its fields, as `row_to_json` writes it
/// (`{"a":1,"b":"x"}`, fields separated by `separator`), or as jsonb
/// prints one.
fn row_text(
    row: &datafusion::arrow::array::StructArray,
    jsonb: bool,
    separator: &str,
) -> Result<String> {
    let mut members = Vec::with_capacity(row.num_columns());
    for (field, column) in row.fields().iter().zip(row.columns()) {
        let value = ScalarValue::try_from_array(column, 0)?;
        let value = member_text(&value, declared_type(field), jsonb)?;
        members.push(format!("{}:{value}", Value::String(field.name().clone())));
    }
    let object = format!("{{{}}}", members.join(separator));
    if !jsonb {
        return Ok(object);
    }
    let doc: Value = serde_json::from_str(&object)
        .map_err(|e| SqlError::value("22P02", format!("invalid JSON of a row: {e}")))?;
    Ok(jsonb_text(&doc))
}

/// `json_agg`'s value from `array_agg`'s list of its values' JSON texts
/// (`to_json`'s): `[1, {"a": 2}]`, elements separated as PostgreSQL
/// separates them, NULL as `null`; NULL for no rows.
pub fn array_of(list: &ScalarValue) -> ScalarValue {
    use datafusion::arrow::array::Array;
    let ScalarValue::List(list) = list else {
        return utf8(None);
    };
    if list.is_null(0) {
        return utf8(None);
    }
    let items = list.value(0);
    let mut array = String::from("[");
    for i in 0..items.len() {
        let member = ScalarValue::try_from_array(&items, i)
            .ok()
            .and_then(|member| text_of(&member));
        let member = member.as_deref().unwrap_or("null");
        if i > 0 {
            array.push_str(", ");
        }
        // As PostgreSQL's json_agg, a row or an array after the first
        // value starts a line.
        let member = match member.strip_prefix(STRUCTURED) {
            Some(structured) if i > 0 => {
                array.push_str("\n ");
                structured
            }
            Some(structured) => structured,
            None => member,
        };
        array.push_str(member);
    }
    array.push(']');
    utf8(Some(array))
}

/// The function `json_agg(x)` aggregates, `to_json(x)` marked as a row or
/// an array.
pub const AGGREGATED_ELEMENT: &str = "json_agg_element";

/// Marks [`AGGREGATED_ELEMENT`]'s text of a row or an array (a character
/// JSON never holds unescaped).
const STRUCTURED: char = '\u{1}';

pub const OBJECT_OF: &str = "json_object_of";

/// `json_object_agg`'s value from `array_agg`'s list of (key, the value's
/// JSON text) pairs: `{ "a" : 1, "b" : [2] }`, as PostgreSQL writes it,
/// each value's text as it is; NULL for no rows, 22004 for a NULL key.
pub fn object_of(list: &ScalarValue) -> Result<ScalarValue> {
    use datafusion::arrow::array::{Array, AsArray};
    let ScalarValue::List(list) = list else {
        return Ok(utf8(None));
    };
    if list.is_null(0) {
        return Ok(utf8(None));
    }
    let pairs = list.value(0);
    let Some(pairs) = pairs.as_struct_opt() else {
        return Ok(utf8(None));
    };
    let (keys, values) = (pairs.column(0), pairs.column(1));
    let mut members = Vec::with_capacity(pairs.len());
    for i in 0..pairs.len() {
        let key = ScalarValue::try_from_array(keys, i)?;
        let Some(key) = text_of(&key.cast_to(&DataType::Utf8)?) else {
            return Err(SqlError::value("22004", "field name must not be null").into());
        };
        let value = text_of(&ScalarValue::try_from_array(values, i)?);
        let value = value.unwrap_or_else(|| "null".to_owned());
        members.push(format!("{} : {value}", Value::String(key)));
    }
    Ok(utf8(Some(format!("{{ {} }}", members.join(", ")))))
}

/// One step into a JSON value: an object's key or an array's position.
enum Step {
    Key(String),
    Position(i64),
}

impl Step {
    fn of(value: &ScalarValue) -> Option<Step> {
        if let Some(key) = value.try_as_str().flatten() {
            return Some(Step::Key(key.to_owned()));
        }
        match value {
            ScalarValue::Int8(Some(n)) => Some(Step::Position(i64::from(*n))),
            ScalarValue::Int16(Some(n)) => Some(Step::Position(i64::from(*n))),
            ScalarValue::Int32(Some(n)) => Some(Step::Position(i64::from(*n))),
            ScalarValue::Int64(Some(n)) => Some(Step::Position(*n)),
            _ => None,
        }
    }

    /// A path's step, written as text: a position within an array.
    fn of_text(text: &str, within: &Value) -> Option<Step> {
        match within {
            Value::Array(_) => text.trim().parse().ok().map(Step::Position),
            _ => Some(Step::Key(text.to_owned())),
        }
    }

    fn within<'a>(&self, value: &'a Value) -> Option<&'a Value> {
        match (self, value) {
            (Step::Key(key), Value::Object(object)) => object.get(key),
            (Step::Position(at), Value::Array(items)) => {
                array_index(*at, items.len()).map(|at| &items[at])
            }
            _ => None,
        }
    }
}

/// The element of an array of `len` elements that position `at` names
/// (counted from the end when negative), if the array has it.
fn array_index(at: i64, len: usize) -> Option<usize> {
    let at = if at < 0 { len as i64 + at } else { at };
    usize::try_from(at).ok().filter(|&at| at < len)
}

/// The JSON text of a value, parsed; `Err` for text that is not JSON.
fn document(value: &ScalarValue) -> Result<Option<Value>> {
    let text = match value.try_as_str() {
        Some(text) => text,
        None if value.is_null() => None,
        None => return invalid_json(&value.to_string()),
    };
    match text {
        None => Ok(None),
        Some(text) => match serde_json::from_str(text) {
            Ok(value) => Ok(Some(value)),
            Err(e) => invalid_json(&format!("{text}: {e}")),
        },
    }
}

fn invalid_json<T>(detail: &str) -> Result<T> {
    let message = format!("invalid input syntax for type json: {detail}");
    Err(crate::sql::SqlError::value("22P02", message).into())
}

/// A path written as PostgreSQL's text array literal (`{a,0,"b c"}`), or
/// given as an array.
fn path(value: &ScalarValue) -> Option<Vec<String>> {
    if let Some(s) = value.try_as_str().flatten() {
        let inner = s.trim().strip_prefix('{')?.strip_suffix('}')?;
        if inner.trim().is_empty() {
            return Some(Vec::new());
        }
        let steps = inner.split(',');
        return Some(
            steps
                .map(|step| step.trim().trim_matches('"').to_owned())
                .collect(),
        );
    }
    let ScalarValue::List(list) = value else {
        return None;
    };
    let values = list.value(0);
    (0..values.len())
        .map(|i| text_of(&ScalarValue::try_from_array(&values, i).ok()?))
        .collect()
}

/// The order of an object's keys in `jsonb`: shorter first, then bytewise.
fn jsonb_key_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// A value as `jsonb` prints it.
pub fn jsonb_text(value: &Value) -> String {
    let mut out = String::new();
    write_jsonb(value, None, &mut out);
    out
}

/// Writes `value` as `jsonb` prints it: on one line (`pretty` None), or as
/// `jsonb_pretty` lays it out, each member on a line of its own, four
/// spaces a level from level `pretty` (an empty array or object too
/// takes two lines there, as in PostgreSQL).
fn write_jsonb(value: &Value, pretty: Option<usize>, out: &mut String) {
    let (members, open, close): (Vec<(Option<&String>, &Value)>, char, char) = match value {
        Value::Array(items) => (items.iter().map(|item| (None, item)).collect(), '[', ']'),
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort_by(|a, b| jsonb_key_order(a, b));
            let members = keys.into_iter().map(|key| (Some(key), &object[key]));
            (members.collect(), '{', '}')
        }
        // A number as jsonb's numeric holds it: as written, but for an
        // exponent (`1.50e1` is `15.0`).
        Value::Number(number) => {
            let text = number.to_string();
            let plain = without_exponent(&text, JSONB_NUMBER_DIGITS);
            return out.push_str(plain.as_deref().unwrap_or(&text));
        }
        scalar => return out.push_str(&scalar.to_string()),
    };
    let inner = pretty.map(|level| level + 1);
    out.push(open);
    for (i, (key, member)) in members.into_iter().enumerate() {
        match inner {
            Some(level) => {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&"    ".repeat(level));
            }
            None if i > 0 => out.push_str(", "),
            None => {}
        }
        if let Some(key) = key {
            out.push_str(&Value::String(key.clone()).to_string());
            out.push_str(": ");
        }
        write_jsonb(member, inner, out);
    }
    if let Some(level) = pretty {
        out.push('\n');
        out.push_str(&"    ".repeat(level));
    }
    out.push(close);
}

/// A value as `->>` gives it: a string's text, `null` as NULL, anything
/// else its JSON.
fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(jsonb_text(other)),
    }
}

fn utf8(text: Option<String>) -> ScalarValue {
    ScalarValue::Utf8(text)
}

/// `doc -> step` (`text`: `->>`).
pub fn get(args: &[ScalarValue], text: bool) -> Result<ScalarValue> {
    let (Some(doc), Some(step)) = (document(&args[0])?, Step::of(&args[1])) else {
        return Ok(utf8(None));
    };
    let found = step.within(&doc);
    Ok(utf8(match text {
        true => found.and_then(as_text),
        false => found.map(jsonb_text),
    }))
}

/// `doc #> path` (`text`: `#>>`), the path a text array.
pub fn get_path(args: &[ScalarValue], text: bool) -> Result<ScalarValue> {
    match path(&args[1]) {
        Some(steps) => walk(&args[0], &steps, text),
        None => Ok(utf8(None)),
    }
}

/// `json_extract_path(doc, 'a', 'b')` (`text`: `..._text`).
pub fn extract_path(args: &[ScalarValue], text: bool) -> Result<ScalarValue> {
    let steps: Option<Vec<String>> = args[1..].iter().map(text_of).collect();
    match steps {
        Some(steps) => walk(&args[0], &steps, text),
        None => Ok(utf8(None)),
    }
}

fn walk(doc: &ScalarValue, steps: &[String], text: bool) -> Result<ScalarValue> {
    let Some(doc) = document(doc)? else {
        return Ok(utf8(None));
    };
    let mut at = Some(&doc);
    for step in steps {
        at = at.and_then(|value| Step::of_text(step, value)?.within(value));
    }
    Ok(utf8(match text {
        true => at.and_then(as_text),
        false => at.map(jsonb_text),
    }))
}

/// `json_array_length(doc)`: an error for anything but an array.
pub fn array_length(args: &[ScalarValue]) -> Result<ScalarValue> {
    Ok(ScalarValue::Int32(match document(&args[0])? {
        None => None,
        Some(Value::Array(items)) => Some(items.len() as i32),
        Some(_) => return invalid_value("cannot get array length of a non-array"),
    }))
}

/// What `json_array_elements(doc)` (`..._text`) and `json_object_keys(doc)`
/// become inside `unnest(...)`: the set as a list.
pub const ELEMENTS: &str = "json_elements_list";
pub const ELEMENTS_TEXT: &str = "json_elements_text_list";
pub const KEYS: &str = "json_keys_list";
/// The values of an object, in the order of [`KEYS`] (`json_each`'s).
pub const VALUES: &str = "json_values_list";
/// The same as text, as `->>` gives them (`json_each_text`'s).
pub const VALUES_TEXT: &str = "json_values_text_list";

/// An array's elements (`text`: as `->>` gives them), or an object's keys
/// in `jsonb`'s order, as a list of text; an error for any other value.
pub fn members(args: &[ScalarValue], of: Members) -> Result<ScalarValue> {
    let Some(doc) = document(&args[0])? else {
        return ScalarValue::try_from(DataType::new_list(DataType::Utf8, true));
    };
    let texts: Vec<Option<String>> = match (&doc, of) {
        (Value::Array(items), Members::Elements) => {
            items.iter().map(|item| Some(jsonb_text(item))).collect()
        }
        (Value::Array(items), Members::ElementsText) => items.iter().map(as_text).collect(),
        (Value::Object(object), Members::Keys | Members::Values | Members::ValuesText) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort_by(|a, b| jsonb_key_order(a, b));
            let member = |key: &String| match of {
                Members::Values => Some(jsonb_text(&object[key])),
                Members::ValuesText => as_text(&object[key]),
                _ => Some(key.clone()),
            };
            keys.into_iter().map(member).collect()
        }
        (_, Members::Values | Members::ValuesText) => {
            return invalid_value("cannot call json_each on a non-object")
        }
        (Value::Array(_), Members::Keys) => {
            return invalid_value("cannot call json_object_keys on an array")
        }
        (_, Members::Keys) => return invalid_value("cannot call json_object_keys on a scalar"),
        (Value::Object(_), _) => return invalid_value("cannot extract elements from an object"),
        _ => return invalid_value("cannot extract elements from a scalar"),
    };
    Ok(text_list(texts))
}

/// What [`members`] lists.
#[derive(Debug, Clone, Copy)]
pub enum Members {
    Elements,
    ElementsText,
    Keys,
    Values,
    ValuesText,
}

fn invalid_value<T>(message: &str) -> Result<T> {
    Err(crate::sql::SqlError::value("22023", message).into())
}

/// `json_typeof(doc)`: `object`, `array`, `string`, `number`, `boolean` or
/// `null`.
pub fn type_of(args: &[ScalarValue]) -> Result<ScalarValue> {
    Ok(utf8(document(&args[0])?.map(|doc| {
        match doc {
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
        }
        .to_owned()
    })))
}

/// `container @> contained`: every key and value of an object, every
/// element of an array, is found in the container, as `jsonb`'s `@>`
/// decides; at the top level an array also contains a scalar it holds.
pub fn contains(args: &[ScalarValue]) -> Result<ScalarValue> {
    let (Some(container), Some(contained)) = (document(&args[0])?, document(&args[1])?) else {
        return Ok(ScalarValue::Boolean(None));
    };
    let scalar_in_array = match &container {
        Value::Array(items) => items.iter().any(|item| same_scalar(item, &contained)),
        _ => false,
    };
    Ok(ScalarValue::Boolean(Some(
        scalar_in_array || within(&container, &contained),
    )))
}

fn within(container: &Value, contained: &Value) -> bool {
    match (container, contained) {
        (Value::Object(outer), Value::Object(inner)) => inner
            .iter()
            .all(|(key, value)| outer.get(key).is_some_and(|held| within(held, value))),
        (Value::Array(outer), Value::Array(inner)) => inner
            .iter()
            .all(|value| outer.iter().any(|held| within(held, value))),
        (held, value) => same_scalar(held, value),
    }
}

/// Scalars equal as `jsonb` compares them (`1` and `1.0` are equal); an
/// array or object is no scalar.
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => a == b,
            _ => a.as_f64() == b.as_f64(),
        },
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        (a, b) => a == b,
    }
}

/// `doc ? 'key'` and `doc ?| keys` (`all`: false), `doc ?& keys` (`all`:
/// true): whether an object has the keys, or an array holds them as
/// strings, at the top level.
pub fn has_keys(args: &[ScalarValue], all: bool) -> Result<ScalarValue> {
    let Some(doc) = document(&args[0])? else {
        return Ok(ScalarValue::Boolean(None));
    };
    let keys: Vec<String> = match &args[1] {
        ScalarValue::List(list) if datafusion::arrow::array::Array::is_valid(list.as_ref(), 0) => {
            let items = list.value(0);
            (0..items.len())
                .filter_map(|i| ScalarValue::try_from_array(&items, i).ok())
                .filter_map(|key| text_of(&key))
                .collect()
        }
        key => match text_of(key) {
            Some(key) => vec![key],
            None => return Ok(ScalarValue::Boolean(None)),
        },
    };
    let has = |key: &String| match &doc {
        Value::Object(fields) => fields.contains_key(key),
        Value::Array(items) => items.iter().any(|item| item.as_str() == Some(key)),
        Value::String(text) => text == key,
        _ => false,
    };
    Ok(ScalarValue::Boolean(Some(match all {
        true => keys.iter().all(has),
        false => keys.iter().any(has),
    })))
}

/// `jsonb_strip_nulls(doc)`: the document without the object fields whose
/// value is `null`, at every depth (an array's nulls stay).
pub fn strip_nulls(args: &[ScalarValue]) -> Result<ScalarValue> {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(fields) => {
                fields.retain(|_, v| !v.is_null());
                fields.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    Ok(utf8(document(&args[0])?.map(|mut doc| {
        strip(&mut doc);
        jsonb_text(&doc)
    })))
}

/// `jsonb_pretty(doc)`: the document as PostgreSQL indents it, four
/// spaces a level, each member on a line of its own.
pub fn pretty(args: &[ScalarValue]) -> Result<ScalarValue> {
    Ok(utf8(document(&args[0])?.map(|doc| {
        let mut out = String::new();
        write_jsonb(&doc, Some(0), &mut out);
        out
    })))
}

/// `jsonb_set(doc, path, value [, create_if_missing])`: the document with
/// the value at `path` (keys, and positions in arrays, from the end when
/// negative) replaced by `value`; a missing last step is added when
/// `create_if_missing` (true unless given): a key to its object, a
/// position past an array's end appended (before its start, prepended).
/// A missing step before the last leaves the document as it is.
pub fn set(args: &[ScalarValue]) -> Result<ScalarValue> {
    if args.iter().any(ScalarValue::is_null) {
        return Ok(utf8(None));
    }
    let (Some(mut doc), Some(new)) = (document(&args[0])?, document(&args[2])?) else {
        return Ok(utf8(None));
    };
    let steps = path_steps(&args[1])?;
    let create = !matches!(args.get(3), Some(ScalarValue::Boolean(Some(false))));
    if !(doc.is_object() || doc.is_array()) {
        return invalid_value("cannot set path in scalar");
    }
    match parent_of(&mut doc, &steps)? {
        Some((Value::Object(fields), last, _)) if create || fields.contains_key(last) => {
            fields.insert(last.clone(), new);
        }
        Some((Value::Array(items), last, position)) => {
            let at = path_position(last, position)?;
            match array_index(at, items.len()) {
                Some(at) => items[at] = new,
                None if create && at < 0 => items.insert(0, new),
                None if create => items.push(new),
                None => {}
            }
        }
        _ => {}
    }
    Ok(utf8(Some(jsonb_text(&doc))))
}

/// `doc #- path`: the document without the value at `path` (as
/// [`set`] reads paths); a missing step leaves it as it is.
pub fn delete_path(args: &[ScalarValue]) -> Result<ScalarValue> {
    let (Some(mut doc), false) = (document(&args[0])?, args[1].is_null()) else {
        return Ok(utf8(None));
    };
    let steps = path_steps(&args[1])?;
    if !(doc.is_object() || doc.is_array()) {
        return invalid_value("cannot delete path in scalar");
    }
    match parent_of(&mut doc, &steps)? {
        Some((Value::Object(fields), last, _)) => {
            fields.remove(last);
        }
        Some((Value::Array(items), last, position)) => {
            if let Some(at) = array_index(path_position(last, position)?, items.len()) {
                items.remove(at);
            }
        }
        _ => {}
    }
    Ok(utf8(Some(jsonb_text(&doc))))
}

fn path_steps(value: &ScalarValue) -> Result<Vec<String>> {
    match path(value) {
        Some(steps) => Ok(steps),
        None => invalid_json(&format!("{value} is not a path")),
    }
}

/// The value holding a path's last step, with that step and its position
/// (1 for the first); `None` for an empty path or a missing step before
/// the last.
fn parent_of<'a>(
    value: &'a mut Value,
    steps: &'a [String],
) -> Result<Option<(&'a mut Value, &'a String, usize)>> {
    let Some((last, before)) = steps.split_last() else {
        return Ok(None);
    };
    let mut current = value;
    for (i, step) in before.iter().enumerate() {
        let child = match current {
            Value::Object(fields) => fields.get_mut(step),
            Value::Array(items) => {
                array_index(path_position(step, i + 1)?, items.len()).map(|at| &mut items[at])
            }
            _ => None,
        };
        let Some(child) = child else {
            return Ok(None);
        };
        current = child;
    }
    Ok(Some((current, last, steps.len())))
}

/// Path step `step` (number `position`) into an array: the position it
/// writes (22P02 for one that is no integer).
fn path_position(step: &str, position: usize) -> Result<i64> {
    step.parse::<i64>().map_err(|_| {
        let message = format!("path element at position {position} is not an integer: \"{step}\"");
        SqlError::value("22P02", message).into()
    })
}

pub const CONCAT: &str = "jsonb_concat";
pub const DELETE_PATH: &str = "jsonb_delete_path";
pub const DELETE: &str = "jsonb_delete";

/// `a || b` of `jsonb`: two objects merged (`b`'s value for a key both
/// have), two arrays joined, anything else joined as elements of an array.
pub fn concat(args: &[ScalarValue]) -> Result<ScalarValue> {
    let (Some(a), Some(b)) = (document(&args[0])?, document(&args[1])?) else {
        return Ok(utf8(None));
    };
    let joined = match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            a.extend(b);
            Value::Object(a)
        }
        (Value::Array(mut a), Value::Array(b)) => {
            a.extend(b);
            Value::Array(a)
        }
        (Value::Array(mut a), b) => {
            a.push(b);
            Value::Array(a)
        }
        (a, Value::Array(mut b)) => {
            b.insert(0, a);
            Value::Array(b)
        }
        (a, b) => Value::Array(vec![a, b]),
    };
    Ok(utf8(Some(jsonb_text(&joined))))
}

/// `doc - 'key'` of `jsonb`: an object without the key, an array without
/// the strings equal to it; `doc - n`: an array without its element `n`
/// (from the end when negative).
pub fn delete(args: &[ScalarValue]) -> Result<ScalarValue> {
    let (Some(doc), false) = (document(&args[0])?, args[1].is_null()) else {
        return Ok(utf8(None));
    };
    let cannot = |what: &str| -> Result<ScalarValue> {
        Err(SqlError::value("22023", format!("cannot delete from {what}")).into())
    };
    let left = if args[1].data_type().is_integer() {
        let index = super::functions::int(&args[1]).unwrap_or(i64::MAX);
        match doc {
            Value::Array(mut items) => {
                if let Some(at) = array_index(index, items.len()) {
                    items.remove(at);
                }
                Value::Array(items)
            }
            Value::Object(_) => return cannot("object using integer index"),
            _ => return cannot("scalar"),
        }
    } else {
        let Some(key) = text_of(&args[1]) else {
            return Ok(utf8(None));
        };
        match doc {
            Value::Object(mut fields) => {
                fields.remove(&key);
                Value::Object(fields)
            }
            Value::Array(mut items) => {
                items.retain(|item| item.as_str() != Some(key.as_str()));
                Value::Array(items)
            }
            _ => return cannot("scalar"),
        }
    };
    Ok(utf8(Some(jsonb_text(&left))))
}

/// Plans JSON's `@>`, `<@`, `?`, `?|` and `?&` over text (how `json` and
/// `jsonb` columns read) as calls of its functions, and `jsonb`'s `||` and
/// `-` (with a `jsonb` left side, or a `jsonb` side and a literal) as
/// calls of [`concat`] and [`delete`]; arrays' `@>` and `<@` stay
/// DataFusion's or `arrays::ArrayOperators`' (planned first), and `||` of
/// text DataFusion's.
#[derive(Debug)]
pub struct JsonOperators {
    pub contains: Arc<ScalarUDF>,
    pub has_any_key: Arc<ScalarUDF>,
    pub has_all_keys: Arc<ScalarUDF>,
    pub concat: Arc<ScalarUDF>,
    pub delete: Arc<ScalarUDF>,
    pub delete_path: Arc<ScalarUDF>,
}

impl JsonOperators {
    fn plan_jsonb(
        &self,
        op: &BinaryOperator,
        left: &Expr,
        right: &Expr,
        schema: &DFSchema,
    ) -> Option<Expr> {
        let jsonb = |e: &Expr| {
            e.to_field(schema)
                .is_ok_and(|(_, field)| declared_type(&field) == Some(SqlType::Jsonb))
        };
        let literal = |e: &Expr| matches!(e, Expr::Literal(ScalarValue::Utf8(_), _));
        let call = |function: &Arc<ScalarUDF>, args: Vec<Expr>| {
            Expr::ScalarFunction(ScalarFunction::new_udf(function.clone(), args))
        };
        match op {
            BinaryOperator::StringConcat
                if (jsonb(left) && (jsonb(right) || literal(right)))
                    || (jsonb(right) && literal(left)) =>
            {
                Some(call(&self.concat, vec![left.clone(), right.clone()]))
            }
            BinaryOperator::Minus if jsonb(left) => {
                Some(call(&self.delete, vec![left.clone(), right.clone()]))
            }
            BinaryOperator::HashMinus if jsonb(left) => {
                Some(call(&self.delete_path, vec![left.clone(), right.clone()]))
            }
            _ => None,
        }
    }
}

impl ExprPlanner for JsonOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let RawBinaryExpr { op, left, right } = expr;
        if let Some(planned) = self.plan_jsonb(&op, &left, &right, schema) {
            return Ok(PlannerResult::Planned(planned));
        }
        let (function, args) = match op {
            BinaryOperator::AtArrow => (&self.contains, [left, right]),
            BinaryOperator::ArrowAt => (&self.contains, [right, left]),
            BinaryOperator::Question | BinaryOperator::QuestionPipe => {
                (&self.has_any_key, [left, right])
            }
            BinaryOperator::QuestionAnd => (&self.has_all_keys, [left, right]),
            _ => return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right })),
        };
        let is_text = args[0]
            .get_type(schema)
            .is_ok_and(|t| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View));
        if !is_text {
            let [left, right] = match op {
                BinaryOperator::ArrowAt => {
                    let [right, left] = args;
                    [left, right]
                }
                _ => args,
            };
            return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right }));
        }
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(function.clone(), args.into()),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> ScalarValue {
        ScalarValue::Utf8(Some(s.into()))
    }

    const DOC: &str = r#"{"b": {"c": [10, 20, {"d": "x"}]}, "a": 1, "s": "t", "n": null}"#;

    #[test]
    fn set_replaces_adds_or_leaves_as_postgresql_does() {
        let set_to = |doc: &str, path: &str, value: &str, create: bool| {
            set(&[
                text(doc),
                text(path),
                text(value),
                ScalarValue::Boolean(Some(create)),
            ])
            .unwrap()
        };
        assert_eq!(
            set_to(DOC, "{b,c,1}", "[5]", true),
            text(r#"{"a": 1, "b": {"c": [10, [5], {"d": "x"}]}, "n": null, "s": "t"}"#)
        );
        assert_eq!(
            set_to(r#"{"a": 1}"#, "{z}", "2", true),
            text(r#"{"a": 1, "z": 2}"#)
        );
        assert_eq!(
            set_to(r#"{"a": 1}"#, "{z}", "2", false),
            text(r#"{"a": 1}"#)
        );
        assert_eq!(
            set_to(r#"{"a": 1}"#, "{y,z}", "2", true),
            text(r#"{"a": 1}"#)
        );
        assert_eq!(set_to("[1, 2]", "{-1}", "3", true), text("[1, 3]"));
        assert_eq!(set_to("[1, 2]", "{9}", "3", true), text("[1, 2, 3]"));
        assert_eq!(set_to("[1, 2]", "{-9}", "0", true), text("[0, 1, 2]"));
        assert!(set(&[text("[1]"), text("{x}"), text("1")]).is_err());
        let without = |doc: &str, path: &str| delete_path(&[text(doc), text(path)]).unwrap();
        assert_eq!(
            without(DOC, "{b,c,-1}"),
            text(r#"{"a": 1, "b": {"c": [10, 20]}, "n": null, "s": "t"}"#)
        );
        assert_eq!(without(r#"{"a": 1}"#, "{a}"), text("{}"));
        assert_eq!(without(r#"{"a": 1}"#, "{x,y}"), text(r#"{"a": 1}"#));
        assert!(delete_path(&[text("[1]"), text("{x}")]).is_err());
        assert!(set(&[text("1"), text("{x}"), text("1")]).is_err());
        assert_eq!(
            set(&[text("[1]"), text("{0}"), utf8(None)]).unwrap(),
            utf8(None)
        );
    }

    #[test]
    fn concatenation_and_deletion_are_jsonb_s() {
        let joined = |a: &str, b: &str| concat(&[text(a), text(b)]).unwrap();
        assert_eq!(
            joined(r#"{"a": 1, "b": 2}"#, r#"{"b": 3}"#),
            text(r#"{"a": 1, "b": 3}"#)
        );
        assert_eq!(joined("[1]", "[2, 3]"), text("[1, 2, 3]"));
        assert_eq!(joined("[1]", r#"{"a": 1}"#), text(r#"[1, {"a": 1}]"#));
        assert_eq!(joined("1", "[2]"), text("[1, 2]"));
        assert_eq!(joined(r#"{"a": 1}"#, "2"), text(r#"[{"a": 1}, 2]"#));
        assert_eq!(concat(&[utf8(None), text("[]")]).unwrap(), utf8(None));
        let without = |doc: &str, what: ScalarValue| delete(&[text(doc), what]).unwrap();
        assert_eq!(
            without(DOC, text("b")),
            text(r#"{"a": 1, "n": null, "s": "t"}"#)
        );
        assert_eq!(without(r#"["x", 1, "x"]"#, text("x")), text("[1]"));
        assert_eq!(
            without("[1, 2, 3]", ScalarValue::Int64(Some(-1))),
            text("[1, 2]")
        );
        assert_eq!(
            without("[1, 2, 3]", ScalarValue::Int32(Some(3))),
            text("[1, 2, 3]")
        );
        assert!(delete(&[text(DOC), ScalarValue::Int64(Some(0))]).is_err());
        assert!(delete(&[text("1"), text("a")]).is_err());
    }

    #[test]
    fn containment_is_jsonb_s() {
        let holds = |a: &str, b: &str| contains(&[text(a), text(b)]).unwrap();
        let yes = ScalarValue::Boolean(Some(true));
        let no = ScalarValue::Boolean(Some(false));
        assert_eq!(holds(DOC, r#"{"b": {"c": [{"d": "x"}]}}"#), yes);
        assert_eq!(holds(DOC, r#"{"a": 1.0, "n": null}"#), yes);
        assert_eq!(holds(DOC, r#"{"b": {"c": 10}}"#), no);
        assert_eq!(holds("[1, [2, 3]]", "[[2], 1]"), yes);
        // A scalar in an array only at the top level.
        assert_eq!(holds("[1, 2]", "2"), yes);
        assert_eq!(holds("[[1, 2]]", "[2]"), no);
        assert_eq!(holds("\"a\"", "\"a\""), yes);
        assert_eq!(holds("{}", "[]"), no);
        assert_eq!(
            contains(&[utf8(None), text("{}")]).unwrap(),
            ScalarValue::Boolean(None)
        );
    }

    #[test]
    fn keys_are_found_at_the_top_level() {
        let has = |doc: &str, key: &str| has_keys(&[text(doc), text(key)], false).unwrap();
        assert_eq!(has(DOC, "a"), ScalarValue::Boolean(Some(true)));
        assert_eq!(has(DOC, "c"), ScalarValue::Boolean(Some(false)));
        assert_eq!(has(r#"["a", 1]"#, "a"), ScalarValue::Boolean(Some(true)));
        assert_eq!(has(r#"["1"]"#, "1"), ScalarValue::Boolean(Some(true)));
        assert_eq!(has("[1]", "1"), ScalarValue::Boolean(Some(false)));
    }

    #[test]
    fn operators_step_into_objects_and_arrays() {
        assert_eq!(get(&[text(DOC), text("a")], true).unwrap(), text("1"));
        assert_eq!(get(&[text(DOC), text("s")], true).unwrap(), text("t"));
        assert_eq!(get(&[text(DOC), text("s")], false).unwrap(), text("\"t\""));
        assert_eq!(get(&[text(DOC), text("n")], true).unwrap(), utf8(None));
        assert_eq!(get(&[text(DOC), text("n")], false).unwrap(), text("null"));
        assert_eq!(get(&[text(DOC), text("zz")], false).unwrap(), utf8(None));
        assert_eq!(
            get(&[text(DOC), text("b")], false).unwrap(),
            text(r#"{"c": [10, 20, {"d": "x"}]}"#)
        );
        let array = text("[1, 2, 3]");
        assert_eq!(
            get(&[array.clone(), ScalarValue::Int32(Some(-1))], true).unwrap(),
            text("3")
        );
        assert_eq!(
            get(&[array, ScalarValue::Int64(Some(5))], true).unwrap(),
            utf8(None)
        );
        assert_eq!(
            get_path(&[text(DOC), text("{b,c,2,d}")], true).unwrap(),
            text("x")
        );
        assert_eq!(
            extract_path(&[text(DOC), text("b"), text("c"), text("1")], false).unwrap(),
            text("20")
        );
        assert!(get(&[text("{oops"), text("a")], true).is_err());
    }

    #[test]
    fn values_print_as_jsonb_prints_them() {
        let value: Value =
            serde_json::from_str(r#"{"bb": [1,2.5,"x"], "a": {"z":true,"y":null}}"#).unwrap();
        assert_eq!(
            jsonb_text(&value),
            r#"{"a": {"y": null, "z": true}, "bb": [1, 2.5, "x"]}"#
        );
        assert_eq!(type_of(&[text("[1]")]).unwrap(), text("array"));
        assert_eq!(
            array_length(&[text("[1, [2, 3]]")]).unwrap(),
            ScalarValue::Int32(Some(2))
        );
        assert!(array_length(&[text("{}")]).is_err());
    }
}
