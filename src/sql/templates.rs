//! PostgreSQL's `to_char` templates: a date's or time's (`YYYY-"Q"Q`,
//! `FMDay, DDth Month`; [`TimeTemplate`]) and a number's (`FM999,990.00`;
//! [`NumberTemplate`]), which [`ToChar`] writes values with; and a
//! template made the chrono format DataFusion's `to_date` and
//! `to_timestamp` read ([`chrono_format`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// What every template reads alike at the start of `rest`.
enum Common<'a> {
    /// Text in double quotes, written as it is.
    Quoted(&'a str),
    /// `FM`: the next pattern without its padding.
    FillMode,
}

/// The [`Common`] part `rest` starts with, if any, and the text after it.
fn common_part(rest: &str) -> Option<(Common<'_>, &str)> {
    if let Some(text) = rest.strip_prefix('"') {
        let end = text.find('"').unwrap_or(text.len());
        return Some((
            Common::Quoted(&text[..end]),
            text.get(end + 1..).unwrap_or(""),
        ));
    }
    let fill_mode = rest.get(..2)?.eq_ignore_ascii_case("FM");
    fill_mode.then(|| (Common::FillMode, &rest[2..]))
}

/// A template of PostgreSQL's (`YYYY-MM-DD HH24:MI:SS`) as the chrono
/// format DataFusion's `to_date` and `to_timestamp` read
/// (`%Y-%m-%d %H:%M:%S`). `FM` before a number drops its padding; month and
/// day names are read as `Month`, `Mon`, `Day` and `Dy` spell them. Other
/// characters are kept, as PostgreSQL keeps what is not a pattern, and so
/// is text in double quotes.
pub fn chrono_format(template: &str) -> String {
    // (pattern, format, format after FM); numbers' patterns in any case.
    const NUMBERS: &[(&str, &str, &str)] = &[
        ("HH24", "%H", "%-H"),
        ("HH12", "%I", "%-I"),
        ("YYYY", "%Y", "%Y"),
        ("DDD", "%j", "%-j"),
        ("HH", "%I", "%-I"),
        ("YY", "%y", "%y"),
        ("MM", "%m", "%-m"),
        ("DD", "%d", "%-d"),
        ("MI", "%M", "%-M"),
        ("SS", "%S", "%-S"),
        ("MS", "%3f", "%3f"),
        ("US", "%6f", "%6f"),
    ];
    const NAMES: &[(&str, &str)] = &[
        ("Month", "%B"),
        ("Mon", "%b"),
        ("Day", "%A"),
        ("Dy", "%a"),
        ("AM", "%p"),
        ("PM", "%p"),
        ("am", "%P"),
        ("pm", "%P"),
    ];
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    let mut fill_mode = false;
    'next: while let Some(c) = rest.chars().next() {
        if let Some((part, after)) = common_part(rest) {
            match part {
                Common::Quoted(text) => out.push_str(&text.replace('%', "%%")),
                Common::FillMode => fill_mode = true,
            }
            rest = after;
            continue;
        }
        for (pattern, padded, unpadded) in NUMBERS {
            if rest
                .get(..pattern.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(pattern))
            {
                out.push_str(if fill_mode { unpadded } else { padded });
                rest = &rest[pattern.len()..];
                fill_mode = false;
                continue 'next;
            }
        }
        for (pattern, format) in NAMES {
            if rest.starts_with(pattern) {
                out.push_str(format);
                rest = &rest[pattern.len()..];
                fill_mode = false;
                continue 'next;
            }
        }
        match c {
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// One part of a date or time template.
#[derive(Debug, Clone, PartialEq)]
enum TimePart {
    /// A number pattern (`YYYY`, `HH24`, ...), with `FM` before it, and
    /// `TH` or `th` after it (an ordinal suffix, in that case).
    Number {
        pattern: &'static str,
        fill: bool,
        ordinal: Option<bool>,
    },
    /// A month's or day's name (`Month`, `MON`, `dy`, ...): the pattern's
    /// case, and padding to nine characters for full names unless `FM`.
    Name {
        pattern: &'static str,
        fill: bool,
    },
    /// `AM`, `pm`, `A.M.`, ...: the meridiem in the pattern's style.
    Meridiem(&'static str),
    Text(String),
}

/// A `to_char` template for dates and times, read.
#[derive(Debug, PartialEq)]
pub struct TimeTemplate(Vec<TimePart>);

/// Number patterns, longest first among those sharing a start; matched in
/// any case.
const TIME_NUMBERS: &[&str] = &[
    "HH24", "HH12", "HH", "MI", "SSSSS", "SSSS", "SS", "MS", "US", "Y,YYY", "YYYY", "YYY", "YY",
    "Y", "IYYY", "IYY", "IY", "IW", "ID", "I", "MM", "DDD", "DD", "D", "WW", "W", "Q", "J", "CC",
];
/// Name patterns, matched in their case.
const TIME_NAMES: &[&str] = &[
    "MONTH", "Month", "month", "MON", "Mon", "mon", "DAY", "Day", "day", "DY", "Dy", "dy",
];
const MERIDIEMS: &[&str] = &["A.M.", "P.M.", "a.m.", "p.m.", "AM", "PM", "am", "pm"];

impl TimeTemplate {
    pub fn parse(template: &str) -> TimeTemplate {
        let mut parts = Vec::new();
        let mut rest = template;
        let mut fill = false;
        'next: while let Some(c) = rest.chars().next() {
            if let Some((part, after)) = common_part(rest) {
                match part {
                    Common::Quoted(text) => parts.push(TimePart::Text(text.to_owned())),
                    Common::FillMode => fill = true,
                }
                rest = after;
                continue;
            }
            for pattern in TIME_NAMES {
                if rest.starts_with(pattern) {
                    parts.push(TimePart::Name { pattern, fill });
                    rest = &rest[pattern.len()..];
                    fill = false;
                    continue 'next;
                }
            }
            for pattern in MERIDIEMS {
                if rest.starts_with(pattern) {
                    parts.push(TimePart::Meridiem(pattern));
                    rest = &rest[pattern.len()..];
                    continue 'next;
                }
            }
            for pattern in TIME_NUMBERS {
                if rest
                    .get(..pattern.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(pattern))
                {
                    rest = &rest[pattern.len()..];
                    let ordinal = match rest.get(..2) {
                        Some("TH") => Some(true),
                        Some("th") => Some(false),
                        _ => None,
                    };
                    if ordinal.is_some() {
                        rest = &rest[2..];
                    }
                    parts.push(TimePart::Number {
                        pattern,
                        fill,
                        ordinal,
                    });
                    fill = false;
                    continue 'next;
                }
            }
            parts.push(TimePart::Text(c.into()));
            rest = &rest[c.len_utf8()..];
        }
        TimeTemplate(parts)
    }

    /// A moment as the template writes it.
    pub fn format(&self, t: chrono::NaiveDateTime) -> String {
        use chrono::{Datelike, Timelike};
        let mut out = String::new();
        for part in &self.0 {
            match part {
                TimePart::Text(text) => out.push_str(text),
                TimePart::Meridiem(pattern) => {
                    let pm = t.hour() >= 12;
                    let text = match pattern.contains('.') {
                        true => {
                            if pm {
                                "P.M."
                            } else {
                                "A.M."
                            }
                        }
                        false => {
                            if pm {
                                "PM"
                            } else {
                                "AM"
                            }
                        }
                    };
                    match pattern.chars().next().is_some_and(char::is_lowercase) {
                        true => out.push_str(&text.to_lowercase()),
                        false => out.push_str(text),
                    }
                }
                TimePart::Name { pattern, fill } => {
                    let (full, format) = match pattern.to_ascii_uppercase().as_str() {
                        "MONTH" => (true, "%B"),
                        "MON" => (false, "%b"),
                        "DAY" => (true, "%A"),
                        _ => (false, "%a"),
                    };
                    let name = t.format(format).to_string();
                    let name = match *pattern {
                        p if p.chars().all(|c| c.is_ascii_uppercase()) => name.to_uppercase(),
                        p if p.chars().all(|c| c.is_ascii_lowercase()) => name.to_lowercase(),
                        _ => name,
                    };
                    match full && !fill {
                        true => out.push_str(&format!("{name:<9}")),
                        false => out.push_str(&name),
                    }
                }
                TimePart::Number {
                    pattern,
                    fill,
                    ordinal,
                } => {
                    let iso = t.iso_week();
                    let (value, width): (i64, usize) = match *pattern {
                        "HH24" => (t.hour().into(), 2),
                        "HH12" | "HH" => (
                            match t.hour() % 12 {
                                0 => 12,
                                h => h,
                            }
                            .into(),
                            2,
                        ),
                        "MI" => (t.minute().into(), 2),
                        "SS" => (t.second().into(), 2),
                        "SSSS" | "SSSSS" => (t.num_seconds_from_midnight().into(), 0),
                        "MS" => ((t.nanosecond() / 1_000_000).into(), 3),
                        "US" => ((t.nanosecond() / 1_000).into(), 6),
                        "YYYY" | "Y,YYY" => (t.year().into(), 4),
                        "YYY" => (t.year().rem_euclid(1000).into(), 3),
                        "YY" => (t.year().rem_euclid(100).into(), 2),
                        "Y" => (t.year().rem_euclid(10).into(), 1),
                        "IYYY" => (iso.year().into(), 4),
                        "IYY" => (iso.year().rem_euclid(1000).into(), 3),
                        "IY" => (iso.year().rem_euclid(100).into(), 2),
                        "I" => (iso.year().rem_euclid(10).into(), 1),
                        "IW" => (iso.week().into(), 2),
                        "ID" => (t.weekday().number_from_monday().into(), 1),
                        "MM" => (t.month().into(), 2),
                        "DDD" => (t.ordinal().into(), 3),
                        "DD" => (t.day().into(), 2),
                        "D" => (t.weekday().number_from_sunday().into(), 1),
                        "WW" => ((t.ordinal0() / 7 + 1).into(), 2),
                        "W" => ((t.day0() / 7 + 1).into(), 1),
                        "Q" => ((t.month0() / 3 + 1).into(), 1),
                        "J" => (i64::from(t.num_days_from_ce()) + 1_721_425, 0),
                        _ => ((t.year() - 1).div_euclid(100) as i64 + 1, 2),
                    };
                    let text = match (*pattern, fill) {
                        ("Y,YYY", _) => format!("{},{:03}", value / 1000, value % 1000),
                        (_, true) => value.to_string(),
                        (_, false) => format!("{value:0width$}"),
                    };
                    out.push_str(&text);
                    if let Some(upper) = ordinal {
                        let suffix = match (value % 100, value % 10) {
                            (11..=13, _) => "th",
                            (_, 1) => "st",
                            (_, 2) => "nd",
                            (_, 3) => "rd",
                            _ => "th",
                        };
                        match upper {
                            true => out.push_str(&suffix.to_uppercase()),
                            false => out.push_str(suffix),
                        }
                    }
                }
            }
        }
        out
    }
}

/// One part of a number template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// `9`: a digit, blank when it would be a leading zero.
    Digit,
    /// `0`: a digit, printed even as a leading zero.
    Zero,
    /// `.` or `D`.
    Point,
    /// `,` or `G`: printed only between printed digits.
    Group,
    /// `S` or `SG`: `+` or `-`.
    Sign,
    /// `MI`: `-`, or a blank for a positive number.
    Minus,
    /// `PR`: a negative number in angle brackets.
    Brackets,
    /// Any other text, and text in double quotes (`L`, the currency
    /// symbol, is empty in the C locale: a blank).
    Text(String),
}

/// A `to_char` template for numbers, read.
#[derive(Debug, PartialEq)]
pub struct NumberTemplate {
    parts: Vec<Part>,
    /// `FM`: no padding blanks, no trailing zeros at `9` positions.
    fill_mode: bool,
}

impl NumberTemplate {
    /// Reads a template; `Err` names a pattern this reading does not know
    /// (`EEEE`, `RN`, `TH`, `V`, `PL`).
    pub fn parse(template: &str) -> Result<NumberTemplate, String> {
        let mut parts = Vec::new();
        let mut fill_mode = false;
        let mut rest = template;
        while let Some(c) = rest.chars().next() {
            if let Some((part, after)) = common_part(rest) {
                match part {
                    Common::Quoted(text) => parts.push(Part::Text(text.to_owned())),
                    Common::FillMode => fill_mode = true,
                }
                rest = after;
                continue;
            }
            let upper = rest.get(..2).map(str::to_ascii_uppercase);
            let (part, len) = match (c, upper.as_deref()) {
                (_, Some("SG")) => (Part::Sign, 2),
                (_, Some("MI")) => (Part::Minus, 2),
                (_, Some("PR")) => (Part::Brackets, 2),
                (_, Some(pattern @ ("EE" | "RN" | "TH" | "PL"))) => {
                    return Err(format!("to_char pattern {pattern} is not supported"))
                }
                ('9', _) => (Part::Digit, 1),
                ('0', _) => (Part::Zero, 1),
                ('.' | 'D' | 'd', _) => (Part::Point, 1),
                (',' | 'G' | 'g', _) => (Part::Group, 1),
                ('S' | 's', _) => (Part::Sign, 1),
                ('L' | 'l', _) => (Part::Text(" ".into()), 1),
                ('V' | 'v', _) => return Err("to_char pattern V is not supported".into()),
                (c, _) => (Part::Text(c.into()), c.len_utf8()),
            };
            parts.push(part);
            rest = &rest[len..];
        }
        Ok(NumberTemplate { parts, fill_mode })
    }

    /// Digit positions after the decimal point.
    pub fn fraction_digits(&self) -> usize {
        let point = self.parts.iter().position(|p| *p == Part::Point);
        point.map_or(0, |at| {
            self.parts[at..]
                .iter()
                .filter(|p| matches!(p, Part::Digit | Part::Zero))
                .count()
        })
    }

    /// A number as the template writes it, given its sign and its digits
    /// rounded to [`NumberTemplate::fraction_digits`] decimals (`whole`
    /// without leading zeros, empty for none; `fraction` of exactly that
    /// many digits).
    pub fn format(&self, negative: bool, whole: &str, fraction: &str) -> String {
        let point = self
            .parts
            .iter()
            .position(|p| *p == Part::Point)
            .unwrap_or(self.parts.len());
        let is_digit = |p: &Part| matches!(p, Part::Digit | Part::Zero);
        let whole_positions = self.parts[..point].iter().filter(|p| is_digit(p)).count();
        let overflow = whole.len() > whole_positions;
        // A zero with no decimals shows its units digit.
        let whole = match (whole.is_empty(), fraction.is_empty()) {
            (true, true) => "0",
            _ => whole,
        };
        let anchored_sign = !self
            .parts
            .iter()
            .any(|p| matches!(p, Part::Sign | Part::Minus | Part::Brackets));
        // Which fraction digits FM drops: trailing zeros at `9` positions.
        let mut kept_fraction = fraction.len();
        if self.fill_mode {
            let positions: Vec<&Part> =
                self.parts[point..].iter().filter(|p| is_digit(p)).collect();
            while kept_fraction > 0
                && positions[kept_fraction - 1] == &Part::Digit
                && fraction.as_bytes()[kept_fraction - 1] == b'0'
            {
                kept_fraction -= 1;
            }
        }
        let mut out = String::new();
        // Blanks before the number, and the number from its first digit.
        let (mut lead, mut body) = (String::new(), String::new());
        let mut started = false;
        let mut whole_seen = 0;
        let mut fraction_seen = 0;
        let sign_text = |out: &mut String| {
            if negative {
                out.push('-');
            } else if !self.fill_mode {
                out.push(' ');
            }
        };
        for (i, part) in self.parts.iter().enumerate() {
            let target = if started { &mut body } else { &mut lead };
            match part {
                Part::Digit | Part::Zero if i < point => {
                    // The digit of the number at this position, if any.
                    let from_right = whole_positions - whole_seen;
                    whole_seen += 1;
                    let digit = (from_right <= whole.len())
                        .then(|| whole.as_bytes()[whole.len() - from_right] as char);
                    match (overflow, digit) {
                        (true, _) => {
                            started = true;
                            body.push('#');
                        }
                        (false, Some(d)) => {
                            started = true;
                            body.push(d);
                        }
                        (false, None) if *part == Part::Zero || started => {
                            started = true;
                            body.push('0');
                        }
                        (false, None) => {
                            if !self.fill_mode {
                                target.push(' ');
                            }
                        }
                    }
                }
                Part::Digit | Part::Zero => {
                    fraction_seen += 1;
                    if fraction_seen <= kept_fraction {
                        started = true;
                        body.push(if overflow {
                            '#'
                        } else {
                            fraction.as_bytes()[fraction_seen - 1] as char
                        });
                    }
                }
                Part::Point => {
                    if fraction.is_empty() {
                        continue;
                    }
                    started = true;
                    body.push('.');
                }
                Part::Group => match started {
                    true => body.push(','),
                    false if !self.fill_mode => target.push(' '),
                    false => {}
                },
                Part::Sign if i < point && !started => {
                    body.push(if negative { '-' } else { '+' });
                }
                Part::Sign => target.push(if negative { '-' } else { '+' }),
                Part::Minus if negative => target.push('-'),
                Part::Minus | Part::Brackets if !self.fill_mode && !negative => target.push(' '),
                Part::Minus => {}
                Part::Brackets => {
                    if negative {
                        target.push('>');
                    }
                }
                Part::Text(text) => target.push_str(text),
            }
        }
        // The sign (or `<`) goes just before the number's first digit.
        let before = if anchored_sign {
            let mut sign = String::new();
            sign_text(&mut sign);
            sign
        } else if negative && self.parts.contains(&Part::Brackets) {
            "<".to_owned()
        } else if !negative && !self.fill_mode && self.parts.contains(&Part::Brackets) {
            " ".to_owned()
        } else {
            String::new()
        };
        out.push_str(&lead);
        out.push_str(&before);
        out.push_str(&body);
        out
    }
}

/// A number's sign and digits, rounded to `decimals` decimals (half away
/// from zero for numerics, as Rust rounds a double's exact value for
/// doubles): `(negative, whole digits without leading zeros, decimals)`.
fn rounded_digits(array: &ArrayRef, row: usize, decimals: usize) -> Option<(bool, String, String)> {
    let split = |negative: bool, digits: String| {
        let (whole, fraction) = digits.split_at(digits.len() - decimals);
        let whole = whole.trim_start_matches('0').to_owned();
        Some((negative, whole, fraction.to_owned()))
    };
    match array.data_type() {
        DataType::Decimal128(_, scale) => {
            let v = array.as_primitive::<Decimal128Type>().value(row);
            let scale = (*scale).max(0) as u32;
            let unsigned = v.unsigned_abs();
            let rescaled = match (decimals as u32).checked_sub(scale) {
                Some(more) => unsigned.checked_mul(10u128.checked_pow(more)?)?,
                None => {
                    let unit = 10u128.pow(scale - decimals as u32);
                    unsigned / unit + u128::from(unsigned % unit * 2 >= unit)
                }
            };
            // A numeric rounded to zero has no sign (a double keeps it).
            split(
                v < 0 && rescaled != 0,
                format!("{rescaled:0>width$}", width = decimals + 1),
            )
        }
        DataType::Float64 => {
            let v = array.as_primitive::<Float64Type>().value(row);
            if !v.is_finite() {
                return None;
            }
            let text = format!("{:.*}", decimals, v.abs());
            split(v < 0.0, text.replace('.', ""))
        }
        _ => {
            let v = array.as_primitive::<Int64Type>().value(row);
            let digits = format!("{}{}", v.unsigned_abs(), "0".repeat(decimals));
            split(v < 0, digits)
        }
    }
}

/// `to_char(value, template)` with a literal template: a number with a
/// number template, a date, timestamp or time of day with a date and time
/// template.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ToChar {
    signature: Signature,
}

impl ToChar {
    pub const NAME: &str = "to_char_template";

    pub fn new() -> Self {
        ToChar {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

/// The text `to_char` makes of one row of a column.
type RowText = Box<dyn Fn(&ArrayRef, usize) -> Option<String>>;

/// Row `row` of a date, timestamp or time-of-day column as a moment (a
/// time of day on 1970-01-01; a timestamp with a time zone in UTC: in
/// another session zone, `wall_times` gives `to_char` its wall time).
fn moment_at(array: &ArrayRef, row: usize) -> Option<chrono::NaiveDateTime> {
    use datafusion::arrow::datatypes::{Date32Type, Time64MicrosecondType, TimeUnit};
    let midnight = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?.and_hms_opt(0, 0, 0)?;
    match array.data_type() {
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>().value(row);
            midnight.checked_add_signed(chrono::Duration::days(days.into()))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let micros = array.as_primitive::<Time64MicrosecondType>().value(row);
            midnight.checked_add_signed(chrono::Duration::microseconds(micros))
        }
        _ => {
            let micros = super::types::timestamp_micros_at(array.as_ref(), row)?;
            chrono::DateTime::from_timestamp_micros(micros).map(|t| t.naive_utc())
        }
    }
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [values, ColumnarValue::Scalar(template)] = args.args.as_slice() else {
            return exec_err!("to_char takes a literal template");
        };
        let Some(template) = template.try_as_str().flatten() else {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)));
        };
        let scalar = matches!(values, ColumnarValue::Scalar(_));
        let values = values.to_array(args.number_rows)?;
        let cast = |to: &DataType| datafusion::arrow::compute::cast(&values, to);
        // Each row's text, by the value's kind.
        let text: RowText = match values.data_type() {
            t if t.is_numeric() => {
                let template = NumberTemplate::parse(template)
                    .map_err(|message| crate::sql::SqlError::value("0A000", message))?;
                let decimals = template.fraction_digits();
                Box::new(move |numbers: &ArrayRef, row: usize| {
                    let (negative, whole, fraction) = rounded_digits(numbers, row, decimals)?;
                    Some(template.format(negative, &whole, &fraction))
                })
            }
            DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(..)
            | DataType::Time32(_)
            | DataType::Time64(_) => {
                let template = TimeTemplate::parse(template);
                Box::new(move |moments: &ArrayRef, row: usize| {
                    moment_at(moments, row).map(|t| template.format(t))
                })
            }
            t => return exec_err!("to_char of {t} with a template is not supported"),
        };
        let values: ArrayRef = match values.data_type() {
            DataType::Decimal128(..)
            | DataType::Float64
            | DataType::Date32
            | DataType::Timestamp(..) => values.clone(),
            t if t.is_floating() => cast(&DataType::Float64)?,
            t if t.is_integer() => cast(&DataType::Int64)?,
            DataType::Date64 => cast(&DataType::Date32)?,
            _ => cast(&DataType::Time64(
                datafusion::arrow::datatypes::TimeUnit::Microsecond,
            ))?,
        };
        let mut texts = StringBuilder::new();
        for row in 0..values.len() {
            match values.is_null(row) {
                true => texts.append_null(),
                false => texts.append_option(text(&values, row)),
            }
        }
        let texts = Arc::new(texts.finish()) as ArrayRef;
        Ok(match scalar {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&texts, 0)?),
            false => ColumnarValue::Array(texts),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_char_templates_become_chrono_formats() {
        for (template, format) in [
            ("YYYY-MM-DD HH24:MI:SS", "%Y-%m-%d %H:%M:%S"),
            ("yyyy/mm/dd", "%Y/%m/%d"),
            ("FMDD Mon YYYY, HH12:MI AM", "%-d %b %Y, %I:%M %p"),
            ("Day \"at\" HH24\"h\" 100%", "%A at %Hh 100%%"),
            ("HH24:MI:SS.MS", "%H:%M:%S.%3f"),
        ] {
            assert_eq!(chrono_format(template), format, "{template}");
        }
    }

    #[test]
    fn number_templates_write_numbers_as_postgresql_does() {
        // (value's sign, whole digits, decimals, template, PostgreSQL's text)
        for (negative, whole, fraction, template, text) in [
            (false, "10", "50", "FM999.00", "10.50"),
            (false, "10", "50", "999.99", "  10.50"),
            (true, "10", "50", "999.99", " -10.50"),
            (false, "1234567", "89", "9,999,999.99", " 1,234,567.89"),
            (false, "5", "", "000", " 005"),
            (false, "", "50", "9.99", "  .50"),
            (false, "", "50", "0.99", " 0.50"),
            (false, "", "50", "FM9.99", ".5"),
            (true, "", "50", "FM0.99", "-0.5"),
            (false, "12345", "", "999", " ###"),
            (true, "12", "3", "S999.9", " -12.3"),
            (false, "12", "3", "S999.9", " +12.3"),
            (true, "12", "3", "999.9MI", " 12.3-"),
            (false, "12", "3", "999.9MI", " 12.3 "),
            (true, "12", "3", "999.9PR", " <12.3>"),
            (false, "12", "3", "FM999.9PR", "12.3"),
            (false, "1234", "50", "FM9G999D99", "1,234.5"),
            (false, "1234", "50", "L9999.99", "  1234.50"),
            (false, "", "", "999", "   0"),
            (false, "", "", "FM999", "0"),
            (false, "100", "", "999.", " 100"),
            (false, "7", "", "\"No. \"999", "No.    7"),
            (false, "2", "00", "FM9.99", "2."),
            (false, "10", "00", "9.99", " #.##"),
            (true, "1234", "50", "FM9,999.00", "-1,234.50"),
            (false, "1000000", "", "FM999,999,999", "1,000,000"),
            (false, "", "00", "FM0.00", "0.00"),
            (true, "", "00", "FM0.00", "-0.00"),
            (false, "123", "", "FMS999", "+123"),
            (false, "12", "", "9 9", " 1 2"),
        ] {
            let read = NumberTemplate::parse(template).unwrap();
            assert_eq!(read.format(negative, whole, fraction), text, "{template}");
        }
        assert!(NumberTemplate::parse("99th").is_err());
    }
}
