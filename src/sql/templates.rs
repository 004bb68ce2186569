//! PostgreSQL's `to_char` templates: a date's or time's, made the chrono
//! format DataFusion's `to_char` reads ([`chrono_format`]), and a number's
//! (`FM999,990.00`), which DataFusion has no function for: the
//! [`ToCharNumber`] function formats numbers with it.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// A `to_char` template of PostgreSQL's (`YYYY-MM-DD HH24:MI:SS`) as the
/// chrono format DataFusion's `to_char` reads (`%Y-%m-%d %H:%M:%S`). `FM`
/// before a number drops its padding; month and day names are written as
/// `Month`, `Mon`, `Day` and `Dy` spell them, without PostgreSQL's padding
/// to nine characters. Other characters are kept, as PostgreSQL keeps what
/// is not a pattern, and so is text in double quotes.
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
        if c == '"' {
            let text = &rest[1..];
            let end = text.find('"').unwrap_or(text.len());
            out.push_str(&text[..end].replace('%', "%%"));
            rest = text.get(end + 1..).unwrap_or("");
            continue;
        }
        if rest.get(..2).is_some_and(|p| p.eq_ignore_ascii_case("FM")) {
            fill_mode = true;
            rest = &rest[2..];
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

/// Whether a `to_char` template formats a number (`FM999,990.00`) rather
/// than a date or time: it has a digit position (`9` or `0`) outside double
/// quotes, which no date pattern has.
pub fn is_number_template(template: &str) -> bool {
    template
        .split('"')
        .step_by(2)
        .any(|outside| outside.contains(['9', '0']))
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
            let upper = rest.get(..2).map(str::to_ascii_uppercase);
            let (part, len) = match (c, upper.as_deref()) {
                ('"', _) => {
                    let text = &rest[1..];
                    let end = text.find('"').unwrap_or(text.len());
                    parts.push(Part::Text(text[..end].to_owned()));
                    rest = text.get(end + 1..).unwrap_or("");
                    continue;
                }
                (_, Some("FM")) => {
                    fill_mode = true;
                    rest = &rest[2..];
                    continue;
                }
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

/// `to_char(number, template)` with a number template of PostgreSQL's
/// (see [`NumberTemplate`]); the template a literal.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ToCharNumber {
    signature: Signature,
}

impl ToCharNumber {
    pub const NAME: &str = "to_char_number";

    pub fn new() -> Self {
        ToCharNumber {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ToCharNumber {
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
        let [numbers, ColumnarValue::Scalar(template)] = args.args.as_slice() else {
            return exec_err!("to_char of a number takes a literal template");
        };
        let Some(template) = template.try_as_str().flatten() else {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)));
        };
        let template = NumberTemplate::parse(template).map_err(|message| {
            datafusion::error::DataFusionError::External(Box::new(crate::sql::SqlError::value(
                "0A000", message,
            )))
        })?;
        let scalar = matches!(numbers, ColumnarValue::Scalar(_));
        let numbers = numbers.to_array(args.number_rows)?;
        let numbers: ArrayRef = match numbers.data_type() {
            DataType::Decimal128(..) | DataType::Float64 => numbers,
            t if t.is_floating() => datafusion::arrow::compute::cast(&numbers, &DataType::Float64)?,
            t if t.is_integer() => datafusion::arrow::compute::cast(&numbers, &DataType::Int64)?,
            t => return exec_err!("to_char of {t} with a number template"),
        };
        let decimals = template.fraction_digits();
        let mut texts = StringBuilder::new();
        for row in 0..numbers.len() {
            if numbers.is_null(row) {
                texts.append_null();
                continue;
            }
            match rounded_digits(&numbers, row, decimals) {
                Some((negative, whole, fraction)) => {
                    texts.append_value(template.format(negative, &whole, &fraction))
                }
                None => texts.append_null(),
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
        assert!(is_number_template("FM999.00") && !is_number_template("YYYY-MM \"09\""));
    }
}
