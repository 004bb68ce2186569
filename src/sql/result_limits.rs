//! Functions whose results are as large as their arguments say:
//! `generate_series` and `range` in a select list, `array_repeat`,
//! `array_resize`, `repeat`, `lpad`, `rpad`, `replace` and
//! `regexp_replace`. DataFusion builds such a
//! result whole, in one allocation the query memory does not count, and
//! in one step no statement timeout or cancel request can interrupt:
//! `SELECT generate_series(1, 1000000000)` asked for 8 GB at once, and an
//! allocation that failed ended the server.
//!
//! Each is wrapped to work out, before it runs, the bytes its result over a
//! batch of rows would take, and to refuse past 1 GB, the largest value
//! PostgreSQL holds, with 54000 (program_limit_exceeded, as PostgreSQL's
//! "requested length too large" and "array size exceeds the maximum
//! allowed"). The sizes are estimates from above: a series' length from
//! its bounds and its step's shortest length, a padded text at 4 bytes a
//! character unless it is ASCII.
//!
//! A select list's `generate_series` becomes `unnest` of the array form
//! (see [`super::rewrite`]); in FROM it is a table function that streams
//! its rows in batches, which the refusal's hint says.

use std::hash::{Hash, Hasher};

use datafusion::arrow::array::{Array, ArrayData, ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::length::length;
use datafusion::arrow::compute::{cast, cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{
    DataType, FieldRef, Int64Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::prelude::SessionContext;

use super::error::SqlError;

/// The most a function's result may take over one batch of rows: 1 GB,
/// PostgreSQL's largest value.
pub const RESULT_LIMIT: u64 = 1 << 30;

const NANOS_A_DAY: i128 = 86_400_000_000_000;

/// How a function's arguments size its result over a batch of `rows`
/// rows, in bytes.
type Estimate = fn(&[Arg], usize) -> DfResult<u64>;

/// An argument as an estimate reads it: a constant once, for every row,
/// rather than repeated to the batch's length.
struct Arg {
    values: ArrayRef,
    constant: bool,
}

impl Arg {
    /// Where row `row`'s value is in [`Arg::values`].
    fn at(&self, row: usize) -> usize {
        if self.constant {
            0
        } else {
            row
        }
    }
}

/// Replaces the session's functions of these names with their checked
/// forms.
pub fn register(ctx: &SessionContext) {
    let checked: [(&str, Estimate); 9] = [
        ("generate_series", series_bytes),
        ("range", series_bytes),
        ("array_repeat", repeated_elements_bytes),
        ("array_resize", resized_array_bytes),
        ("repeat", repeated_text_bytes),
        ("lpad", padded_text_bytes),
        ("rpad", padded_text_bytes),
        ("replace", replaced_text_bytes),
        ("regexp_replace", regexp_replaced_text_bytes),
    ];
    for (name, estimate) in checked {
        if let Some(inner) = ctx.state().scalar_functions().get(name).cloned() {
            ctx.register_udf(ScalarUDF::new_from_impl(SizeChecked {
                inner: inner.as_ref().clone(),
                estimate,
            }));
        }
    }
}

/// A function refused when [`SizeChecked::estimate`] puts its result past
/// [`RESULT_LIMIT`]; otherwise the function itself.
#[derive(Debug)]
struct SizeChecked {
    inner: ScalarUDF,
    estimate: Estimate,
}

/// The estimate goes with the function: two are one when they wrap one.
impl PartialEq for SizeChecked {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl Eq for SizeChecked {}

impl Hash for SizeChecked {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
    }
}

impl SizeChecked {
    fn check(&self, args: &[ColumnarValue], rows: usize) -> DfResult<()> {
        let args = args
            .iter()
            .map(|arg| {
                Ok(match arg {
                    ColumnarValue::Array(values) => Arg {
                        values: values.clone(),
                        constant: false,
                    },
                    ColumnarValue::Scalar(value) => Arg {
                        values: value.to_array()?,
                        constant: true,
                    },
                })
            })
            .collect::<DfResult<Vec<_>>>()?;
        // Constants alone make one value.
        let rows = if args.iter().all(|a| a.constant) {
            1
        } else {
            rows
        };
        // Arguments of types an estimate does not read are left to the
        // function itself.
        let bytes = (self.estimate)(&args, rows).unwrap_or(0);
        if bytes <= RESULT_LIMIT {
            return Ok(());
        }
        let name = self.inner.name();
        let error = SqlError::value(
            "54000",
            format!(
                "{name} would make a result of {bytes} bytes, past the {RESULT_LIMIT} bytes \
                 a function's result may take"
            ),
        );
        let hint = (name == "generate_series").then(|| {
            "In FROM, generate_series streams its rows: SELECT ... FROM generate_series(...) AS g"
                .to_owned()
        });
        Err(error.explained(None, hint).into())
    }
}

impl ScalarUDFImpl for SizeChecked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        self.check(&args.args, args.number_rows)?;
        self.inner.invoke_with_args(args)
    }
}

/// `generate_series(start, stop[, step])` and `range(...)` as arrays:
/// 8 bytes a value. The bounds are integers, dates or timestamps, the step
/// an integer or an interval; `range(stop)` starts at 0, and an integer
/// series steps by 1.
fn series_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let (start, stop, step) = match args {
        [stop] => (None, stop, None),
        [start, stop] => (Some(start), stop, None),
        [start, stop, step] => (Some(start), stop, Some(step)),
        _ => return Ok(0),
    };
    let stops = points(&stop.values)?;
    let starts = start.map(|a| points(&a.values)).transpose()?;
    let steps = step.map(|a| step_lengths(&a.values)).transpose()?;
    let at =
        |arg: Option<&Arg>, values: &Option<Vec<Option<i128>>>, row, default| match (arg, values) {
            (Some(arg), Some(values)) => values[arg.at(row)],
            _ => Some(default),
        };
    let mut values: u64 = 0;
    for row in 0..rows {
        let (Some(start), Some(stop), Some(step)) = (
            at(start, &starts, row, 0),
            stops[stop.at(row)],
            at(step, &steps, row, 1),
        ) else {
            continue;
        };
        let span = stop - start;
        if step != 0 && (span == 0 || span.signum() == step.signum()) {
            let length = u64::try_from(span / step + 1).unwrap_or(u64::MAX);
            values = values.saturating_add(length);
        }
    }
    Ok(values.saturating_mul(8))
}

/// A series' bounds on one scale: integers as they are, dates and
/// timestamps in nanoseconds.
fn points(array: &ArrayRef) -> DfResult<Vec<Option<i128>>> {
    let per_unit: i128 = match array.data_type() {
        DataType::Date32 => NANOS_A_DAY,
        DataType::Date64 => 1_000_000,
        DataType::Timestamp(TimeUnit::Second, _) => 1_000_000_000,
        DataType::Timestamp(TimeUnit::Millisecond, _) => 1_000_000,
        DataType::Timestamp(TimeUnit::Microsecond, _) => 1_000,
        _ => 1,
    };
    let integers = cast(array, &DataType::Int64)?;
    Ok(integers
        .as_primitive::<Int64Type>()
        .iter()
        .map(|v| v.map(|v| i128::from(v) * per_unit))
        .collect())
}

/// A series' steps on the scale of [`points`]: an interval at its
/// shortest (a month of 28 days, a day of 23 hours), so that the length
/// worked out is never short.
fn step_lengths(array: &ArrayRef) -> DfResult<Vec<Option<i128>>> {
    const HOUR: i128 = NANOS_A_DAY / 24;
    let lengths = match array.data_type() {
        DataType::Interval(_) => {
            let intervals = cast(array, &DataType::Interval(IntervalUnit::MonthDayNano))?;
            intervals
                .as_primitive::<IntervalMonthDayNanoType>()
                .iter()
                .map(|v| {
                    v.map(|v| {
                        i128::from(v.months) * 28 * NANOS_A_DAY
                            + i128::from(v.days) * 23 * HOUR
                            + i128::from(v.nanoseconds)
                    })
                })
                .collect()
        }
        _ => cast(array, &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(i128::from))
            .collect(),
    };
    Ok(lengths)
}

/// `array_repeat(element, count)`: the element's bytes, count times.
fn repeated_elements_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let [element, count] = args else {
        return Ok(0);
    };
    let counts = counts(&count.values)?;
    let elements = element.values.to_data();
    Ok((0..rows)
        .map(|row| counts[count.at(row)].saturating_mul(value_bytes(&elements, element.at(row))))
        .fold(0, u64::saturating_add))
}

/// `array_resize(array, size[, value])`: `size` elements of the value's
/// bytes, or of the array's element type's (8 where that is not fixed).
fn resized_array_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let (array, size, value) = match args {
        [array, size] => (array, size, None),
        [array, size, value] => (array, size, Some(value)),
        _ => return Ok(0),
    };
    let element_bytes = match array.values.data_type() {
        DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => {
            item.data_type().primitive_width().unwrap_or(8) as u64
        }
        _ => 8,
    };
    let sizes = counts(&size.values)?;
    let values = value.map(|v| (v, v.values.to_data()));
    Ok((0..rows)
        .map(|row| {
            let bytes = values
                .as_ref()
                .map_or(element_bytes, |(v, data)| value_bytes(data, v.at(row)));
            sizes[size.at(row)].saturating_mul(bytes.max(element_bytes))
        })
        .fold(0, u64::saturating_add))
}

/// `repeat(text, count)`: the text's bytes, count times.
fn repeated_text_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let [text, count] = args else {
        return Ok(0);
    };
    let lengths = byte_lengths(text)?;
    let counts = counts(&count.values)?;
    Ok((0..rows)
        .map(|row| lengths[text.at(row)].saturating_mul(counts[count.at(row)]))
        .fold(0, u64::saturating_add))
}

/// `lpad(text, length[, fill])` and `rpad`: `length` characters of 4
/// bytes, or of 1 where the text and the fill are ASCII (looked at only
/// when 4 bytes a character would pass the limit).
fn padded_text_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let (texts, length) = match args {
        [text, length] => (vec![text], length),
        [text, length, fill] => (vec![text, fill], length),
        _ => return Ok(0),
    };
    let lengths = counts(&length.values)?;
    let chars = (0..rows)
        .map(|row| lengths[length.at(row)])
        .fold(0, u64::saturating_add);
    if chars.saturating_mul(4) <= RESULT_LIMIT {
        return Ok(chars.saturating_mul(4));
    }
    for text in texts {
        let text = cast(&text.values, &DataType::Utf8)?;
        if !text.as_string::<i32>().is_ascii() {
            return Ok(chars.saturating_mul(4));
        }
    }
    Ok(chars)
}

/// `replace(text, from, to)`: the text, and `to` for each time `from`
/// could occur in it.
fn replaced_text_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let [text, from, to] = args else {
        return Ok(0);
    };
    let lengths = [text, from, to].map(byte_lengths);
    let [texts, froms, tos] = lengths;
    let (texts, froms, tos) = (texts?, froms?, tos?);
    Ok((0..rows)
        .map(|row| {
            let text = texts[text.at(row)];
            let occurrences = text.checked_div(froms[from.at(row)]).unwrap_or(0);
            text.saturating_add(occurrences.saturating_mul(tos[to.at(row)]))
        })
        .fold(0, u64::saturating_add))
}

/// `regexp_replace(text, pattern, replacement[, flags])`: the text, and
/// the replacement for each match, one or (with the flag `g`) as many as
/// the text has places; each `\n` of the replacement inserts a group, and
/// the groups of disjoint matches come to at most the text.
fn regexp_replaced_text_bytes(args: &[Arg], rows: usize) -> DfResult<u64> {
    let (text, replacement, flags) = match args {
        [text, _, replacement] => (text, replacement, None),
        [text, _, replacement, flags] => (text, replacement, Some(flags)),
        _ => return Ok(0),
    };
    let texts = byte_lengths(text)?;
    let replacements = cast(&replacement.values, &DataType::Utf8)?;
    let replacements = replacements.as_string::<i32>();
    let flags = flags
        .map(|f| Ok::<_, ArrowError>((f, cast(&f.values, &DataType::Utf8)?)))
        .transpose()?;
    let global = |row: usize| {
        flags.as_ref().is_some_and(|(arg, f)| {
            let (f, row) = (f.as_string::<i32>(), arg.at(row));
            f.is_valid(row) && f.value(row).contains('g')
        })
    };
    Ok((0..rows)
        .map(|row| {
            let text = texts[text.at(row)];
            let at = replacement.at(row);
            let (inserted, groups) = match replacements.is_valid(at) {
                true => {
                    let r = replacements.value(at);
                    (r.len() as u64, r.matches('\\').count() as u64)
                }
                false => (0, 0),
            };
            let matches = if global(row) {
                text.saturating_add(1)
            } else {
                1
            };
            text.saturating_add(matches.saturating_mul(inserted))
                .saturating_add(groups.saturating_mul(text))
        })
        .fold(0, u64::saturating_add))
}

/// An argument's texts' lengths in bytes: NULL as 0.
fn byte_lengths(texts: &Arg) -> DfResult<Vec<u64>> {
    counts(&length(&texts.values)?)
}

/// Counts and lengths, a row's: negative or NULL as 0.
fn counts(array: &ArrayRef) -> DfResult<Vec<u64>> {
    let options = CastOptions {
        safe: true,
        ..Default::default()
    };
    let integers = cast_with_options(array, &DataType::Int64, &options)?;
    Ok(integers
        .as_primitive::<Int64Type>()
        .iter()
        .map(|v| v.map_or(0, |v| u64::try_from(v).unwrap_or(0)))
        .collect())
}

/// The bytes one row's value takes.
fn value_bytes(values: &ArrayData, row: usize) -> u64 {
    values
        .slice(row, 1)
        .get_slice_memory_size()
        .map_or(8, |b| b as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use datafusion::arrow::datatypes::IntervalMonthDayNano;
    use datafusion::common::ScalarValue;

    fn constants(values: &[ScalarValue]) -> Vec<Arg> {
        let constant = |v: &ScalarValue| Arg {
            values: v.to_array().unwrap(),
            constant: true,
        };
        values.iter().map(constant).collect()
    }

    /// A constant argument counts once for every row of its batch.
    #[test]
    fn a_constant_counts_for_every_row() {
        use datafusion::arrow::array::StringArray;
        let texts = Arg {
            values: Arc::new(StringArray::from(vec![Some("a"), Some("bb"), None])),
            constant: false,
        };
        let [ten, b, cc] = [
            ScalarValue::Int64(Some(10)),
            ScalarValue::from("b"),
            ScalarValue::from("cc"),
        ]
        .map(|v| constants(&[v]).pop().unwrap());
        assert_eq!(repeated_text_bytes(&[texts, ten], 3).unwrap(), 30);
        let texts = Arg {
            values: Arc::new(StringArray::from(vec!["abab", "b"])),
            constant: false,
        };
        // "abab" could hold 4 "b"s, "b" one: 4 + 4 * 2, 1 + 1 * 2.
        assert_eq!(replaced_text_bytes(&[texts, b, cc], 2).unwrap(), 15);
    }

    /// A series' estimate is its length exactly for integers, and never
    /// short for dates and times.
    #[test]
    fn a_series_is_sized_by_its_bounds_and_step() {
        let int = |v: i64| ScalarValue::Int64(Some(v));
        let values = |args: &[ScalarValue]| series_bytes(&constants(args), 1).unwrap() / 8;
        assert_eq!(values(&[int(1), int(10)]), 10);
        assert_eq!(values(&[int(1), int(10), int(3)]), 4);
        assert_eq!(values(&[int(10), int(1), int(-3)]), 4);
        assert_eq!(values(&[int(10), int(1)]), 0);
        assert_eq!(values(&[int(5)]), 6);
        assert_eq!(values(&[int(1), int(1_000_000_000)]), 1_000_000_000);
        let day = |d: i32| ScalarValue::Date32(Some(d));
        let step = |months, days, nanoseconds| {
            ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano {
                months,
                days,
                nanoseconds,
            }))
        };
        // 2000-01-01 to 2000-12-01 by a month: 12 values.
        assert!(values(&[day(10_957), day(11_292), step(1, 0, 0)]) >= 12);
        assert!(values(&[day(0), day(1), step(0, 0, 1_000_000_000)]) >= 86_401);
        let at = |seconds: i64| ScalarValue::TimestampSecond(Some(seconds), None);
        assert_eq!(values(&[at(0), at(3_600), step(0, 0, 60_000_000_000)]), 61);
    }
}
