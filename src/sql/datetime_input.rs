//! Dates, times of day and timestamps read from text as PostgreSQL 15 reads them, with its
//! default `DateStyle` (`ISO, MDY`); a `timestamptz`'s text without a zone
//! is a wall time in the session's zone ([`SessionZone`]):
//!
//! - ISO 8601 (`2024-03-15`, `2024-03-15T10:30:00.5+02`), with a space or a
//!   `T` before the time, a one-digit hour, a time without seconds;
//! - month first when the year is last (`3/15/2024`, `3-15-24`), month names
//!   (`March 15, 2024`, `15-Mar-2024`, `2024-Mar-15`), `20240315`, a year
//!   and a day of the year (`2024.075`), day names (ignored), `AM` / `PM`;
//! - `BC` after a date (`0044-03-15 BC`), two-digit years (`24` is 2024,
//!   `99` is 1999);
//! - zones as offsets (`+02`, `-05:30`, `+0530`, `Z`), abbreviations
//!   (`UTC`, `PST`, `CEST`) or names in any case (`Europe/Paris`), counted
//!   for a `timestamptz` and ignored for a `date`, a `time` or a
//!   `timestamp`; a `time` may be written alone (`10:30`, `9:45 PM`) or
//!   after a date, which it ignores;
//! - the special inputs `epoch`, `now`, `today`, `tomorrow`, `yesterday`
//!   and `allballs` (midnight).
//!
//! A text that is none of these gets PostgreSQL's error: 22007 for one it
//! cannot read (`invalid input syntax for type date: "abc"`), 22008 for a
//! field out of range (`2024-02-30`) or a value outside the type's range.
//! `infinity` and `-infinity` are refused (0A000): tablegate's dates and
//! timestamps are finite.

use std::borrow::Cow;
use std::sync::Arc;

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{
    ArrayRef, Date32Array, StringArray, Time64MicrosecondArray, Time64NanosecondArray,
    TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
    TimestampSecondArray,
};
use datafusion::arrow::datatypes::{DataType, TimeUnit};

use super::error::SqlError;
use super::time_zone::{instant_of, SessionZone};
use super::types::MICROS_A_DAY;

/// What a text is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Date,
    /// A `timestamp`: a wall-clock time; a zone in the text is ignored.
    Timestamp,
    /// A `timestamptz`: an instant; a zone in the text is counted.
    Timestamptz,
    /// A `time`: a time of day; a date or a zone in the text is ignored.
    Time,
}

impl Target {
    /// The target of a cast to `ty`, if it is a date or a timestamp.
    pub fn of(ty: &DataType) -> Option<Target> {
        match ty {
            DataType::Date32 => Some(Target::Date),
            DataType::Timestamp(_, None) => Some(Target::Timestamp),
            DataType::Timestamp(_, Some(_)) => Some(Target::Timestamptz),
            DataType::Time64(_) => Some(Target::Time),
            _ => None,
        }
    }

    fn pg_name(self) -> &'static str {
        match self {
            Target::Date => "date",
            Target::Timestamp => "timestamp",
            Target::Timestamptz => "timestamp with time zone",
            Target::Time => "time",
        }
    }
}

/// A date read from `text`, in days since 1970-01-01.
pub fn read_date(text: &str) -> Result<i32, SqlError> {
    let read = read(text, Target::Date).map_err(|f| f.error(text, Target::Date))?;
    i32::try_from(read.days).map_err(|_| Failure::Range.error(text, Target::Date))
}

/// A timestamp read from `text`, in microseconds since 1970-01-01 00:00: a
/// wall-clock time (`Target::Timestamp`), or an instant in UTC
/// (`Target::Timestamptz`; a text without a zone is a wall time in `zone`,
/// the session's).
pub fn read_timestamp(text: &str, target: Target, zone: &SessionZone) -> Result<i64, SqlError> {
    let read = read(text, target).map_err(|f| f.error(text, target))?;
    read.micros(target, zone).map_err(|f| f.error(text, target))
}

/// A time of day read from `text`, in microseconds since midnight (to
/// 24:00:00).
pub fn read_time(text: &str) -> Result<i64, SqlError> {
    read(text, Target::Time)
        .map(|read| read.clock)
        .map_err(|f| f.error(text, Target::Time))
}

/// Each of `texts` read as a value of `target` (a date, a time of day, or
/// a timestamp in any unit), those of instants without a zone in `zone`.
pub fn read_texts(
    texts: &StringArray,
    target: &DataType,
    zone: &SessionZone,
) -> Result<ArrayRef, SqlError> {
    let timestamps = |to_unit: fn(i64) -> Option<i64>, kind| {
        texts
            .iter()
            .map(|text| {
                text.map(|text| {
                    let micros = read_timestamp(text, kind, zone)?;
                    to_unit(micros).ok_or_else(|| Failure::Range.error(text, kind))
                })
                .transpose()
            })
            .collect::<Result<Vec<Option<i64>>, SqlError>>()
    };
    Ok(match target {
        DataType::Date32 => Arc::new(
            texts
                .iter()
                .map(|text| text.map(read_date).transpose())
                .collect::<Result<Date32Array, SqlError>>()?,
        ),
        DataType::Time64(unit) => {
            let times = texts
                .iter()
                .map(|text| text.map(read_time).transpose())
                .collect::<Result<Vec<Option<i64>>, SqlError>>()?;
            match unit {
                TimeUnit::Nanosecond => Arc::new(Time64NanosecondArray::from(
                    times
                        .into_iter()
                        .map(|t| t.map(|micros| micros * 1_000))
                        .collect::<Vec<_>>(),
                )) as ArrayRef,
                _ => Arc::new(Time64MicrosecondArray::from(times)),
            }
        }
        DataType::Timestamp(unit, zone_of_type) => {
            let kind = if zone_of_type.is_some() {
                Target::Timestamptz
            } else {
                Target::Timestamp
            };
            let zone = zone_of_type.clone();
            match unit {
                TimeUnit::Second => Arc::new(
                    TimestampSecondArray::from(timestamps(
                        |m| Some(m.div_euclid(1_000_000)),
                        kind,
                    )?)
                    .with_timezone_opt(zone),
                ),
                TimeUnit::Millisecond => Arc::new(
                    TimestampMillisecondArray::from(timestamps(
                        |m| Some(m.div_euclid(1_000)),
                        kind,
                    )?)
                    .with_timezone_opt(zone),
                ),
                TimeUnit::Microsecond => Arc::new(
                    TimestampMicrosecondArray::from(timestamps(Some, kind)?)
                        .with_timezone_opt(zone),
                ),
                TimeUnit::Nanosecond => Arc::new(
                    TimestampNanosecondArray::from(timestamps(|m| m.checked_mul(1_000), kind)?)
                        .with_timezone_opt(zone),
                ),
            }
        }
        other => {
            return Err(SqlError::Internal(format!(
                "a text is read as a date or a timestamp, not as {other}"
            )))
        }
    })
}

/// `text` written as Arrow's parser reads the same value, for the places
/// that hand a text to Arrow's cast (`2024-03-15`, `2024-03-15T10:30:00`,
/// `2024-03-15T08:30:00+00:00` for an instant); the text itself when this
/// module cannot read it or Arrow could not read the value (a timestamp
/// before year 0 or after 9999), and Arrow's cast then refuses it.
pub fn arrow_text<'a>(text: &'a str, target: Target, zone: &SessionZone) -> Cow<'a, str> {
    let Ok(read) = read(text, target) else {
        return Cow::Borrowed(text);
    };
    if target == Target::Time {
        let seconds = read.clock / 1_000_000;
        return Cow::Owned(format!(
            "{:02}:{:02}:{:02}.{:06}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60,
            read.clock % 1_000_000
        ));
    }
    let (year, month, day) = super::types::civil_date(read.days);
    if target == Target::Date {
        let sign = if year < 0 { "-" } else { "" };
        return Cow::Owned(format!("{sign}{:04}-{month:02}-{day:02}", year.abs()));
    }
    let Ok(micros) = read.micros(target, zone) else {
        return Cow::Borrowed(text);
    };
    let (year, month, day) = super::types::civil_date(micros.div_euclid(MICROS_A_DAY));
    if !(0..=9999).contains(&year) {
        return Cow::Borrowed(text);
    }
    let clock = micros.rem_euclid(MICROS_A_DAY);
    let seconds = clock / 1_000_000;
    let zone = if target == Target::Timestamptz {
        "+00:00"
    } else {
        ""
    };
    Cow::Owned(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}{zone}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        clock % 1_000_000
    ))
}

/// Why a text could not be read.
#[derive(Debug, PartialEq)]
enum Failure {
    /// Not a date or a timestamp (22007).
    Syntax,
    /// A field out of its range: month 13, February 30, hour 25 (22008).
    Field,
    /// A value outside the type's range (22008).
    Range,
    /// A zone's offset beyond 15:59:59 (22009).
    Displacement,
    /// A zone's name not known (22023).
    Zone(String),
    /// `infinity` or `-infinity` (0A000).
    Infinite,
}

impl Failure {
    fn error(self, text: &str, target: Target) -> SqlError {
        match self {
            Failure::Syntax => SqlError::value(
                "22007",
                format!(
                    "invalid input syntax for type {}: \"{text}\"",
                    target.pg_name()
                ),
            ),
            Failure::Field => SqlError::value(
                "22008",
                format!("date/time field value out of range: \"{text}\""),
            ),
            Failure::Range => {
                let what = match target {
                    Target::Date => "date",
                    Target::Timestamp | Target::Timestamptz => "timestamp",
                    Target::Time => "time",
                };
                SqlError::value("22008", format!("{what} out of range: \"{text}\""))
            }
            Failure::Displacement => SqlError::value(
                "22009",
                format!("time zone displacement out of range: \"{text}\""),
            ),
            Failure::Zone(name) => {
                SqlError::value("22023", format!("time zone \"{name}\" not recognized"))
            }
            Failure::Infinite => SqlError::FeatureNotSupported(format!(
                "{} \"{text}\": tablegate's dates and timestamps are finite",
                target.pg_name()
            )),
        }
    }
}

/// A text read: a day, a time of day and the zone it was given in.
#[derive(Debug)]
struct Read {
    /// Days since 1970-01-01.
    days: i64,
    /// Microseconds since midnight; a whole day at most (`24:00:00`, or a
    /// leap second's `23:59:60`, which PostgreSQL carries into the next day).
    clock: i64,
    zone: Option<Zone>,
}

#[derive(Debug)]
enum Zone {
    /// Seconds east of UTC.
    Offset(i64),
    Named(Tz),
}

impl Read {
    /// Microseconds since 1970: the wall-clock time, or for an instant the
    /// time in UTC (a text without a zone is a wall time in `session`).
    fn micros(&self, target: Target, session: &SessionZone) -> Result<i64, Failure> {
        // PostgreSQL's first timestamp is 4714-11-24 BC, midnight.
        const FIRST_DAY: i64 = -2_440_588;
        if self.days < FIRST_DAY {
            return Err(Failure::Range);
        }
        let wall = self
            .days
            .checked_mul(MICROS_A_DAY)
            .and_then(|m| m.checked_add(self.clock))
            .ok_or(Failure::Range)?;
        let instant = match (&self.zone, target) {
            (_, Target::Date | Target::Timestamp | Target::Time) => Some(wall),
            (Some(Zone::Offset(seconds)), Target::Timestamptz) => {
                wall.checked_sub(seconds * 1_000_000)
            }
            (Some(Zone::Named(tz)), Target::Timestamptz) => instant_of(tz, wall),
            (None, Target::Timestamptz) => session.instant_of(wall),
        };
        instant.ok_or(Failure::Range)
    }
}

/// `text` read as a date or a timestamp (see the module's comment).
fn read(text: &str, target: Target) -> Result<Read, Failure> {
    let text = text.trim();
    if let Some(read) = plain_iso(text) {
        return Ok(read);
    }
    let is = |word: &str| text.eq_ignore_ascii_case(word);
    if is("infinity") || is("+infinity") || is("-infinity") {
        return Err(Failure::Infinite);
    }
    if is("epoch") {
        return Ok(Read {
            days: 0,
            clock: 0,
            zone: Some(Zone::Offset(0)),
        });
    }
    if is("now") {
        let now = chrono::Utc::now().timestamp_micros();
        return Ok(Read {
            days: now.div_euclid(MICROS_A_DAY),
            clock: now.rem_euclid(MICROS_A_DAY),
            zone: Some(Zone::Offset(0)),
        });
    }
    let mut fields = Fields::default();
    for token in tokens(text)? {
        fields.take(token)?;
    }
    fields.finish(target)
}

/// The form nearly every program writes (`2024-03-15`, `2024-03-15
/// 10:30:05.25`, `2024-03-15T10:30:05+02:00`), as COPY and drivers send
/// it, read without cutting it into tokens: bulk loads read millions.
/// `None` for any other form, and for a field out of range (the tokens'
/// reading then says which error).
fn plain_iso(text: &str) -> Option<Read> {
    let b = text.as_bytes();
    let digits = |from: usize, to: usize| -> Option<u32> {
        b.get(from..to)?.iter().try_fold(0u32, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 7)?, digits(8, 10)?);
    if year == 0 || !(1..=12).contains(&month) || day == 0 {
        return None;
    }
    if day > days_in_month(i64::from(year), month) {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    if b.len() == 10 {
        return Some(Read {
            days,
            clock: 0,
            zone: None,
        });
    }
    if !matches!(b[10], b' ' | b'T') || b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let (hours, minutes, seconds) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    if hours > 23 || minutes > 59 || seconds > 59 {
        return None;
    }
    let mut rest = &text[19..];
    let mut micros = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let end = fraction
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(fraction.len());
        if end == 0 {
            return None;
        }
        micros = fraction_micros(&fraction[..end]).ok()?;
        rest = &fraction[end..];
    }
    let zone = match rest.as_bytes() {
        [] => None,
        [b'Z'] => Some(Zone::Offset(0)),
        [sign @ (b'+' | b'-'), ..] => {
            let seconds = offset_seconds(&rest[1..]).ok()?;
            Some(Zone::Offset(if *sign == b'+' { seconds } else { -seconds }))
        }
        _ => return None,
    };
    let seconds = i64::from((hours * 60 + minutes) * 60 + seconds);
    Some(Read {
        days,
        clock: seconds * 1_000_000 + i64::from(micros),
        zone,
    })
}

/// A piece of a date's or a timestamp's text.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    /// Digits alone: a year or a day (`2024`, `15`), or a date or a time
    /// written without separators (`20240315`, `103000`).
    Number(&'a str),
    /// Parts of a date between one separator (`-`, `/` or `.`):
    /// `2024-03-15`, `3/15/2024`, `15-Mar-2024`, `2024.075`.
    Date(Vec<&'a str>),
    /// `10:30`, `10:30:05.25`.
    Time(&'a str),
    /// Letters: a month's or a day's name, `BC`, `PM`, a zone's name.
    Word(&'a str),
    /// A zone's offset from UTC, east positive: `+02`, `-05:30`, `+0530`.
    Offset(bool, &'a str),
}

/// `text` cut into tokens; spaces and commas only separate them.
fn tokens(text: &str) -> Result<Vec<Token<'_>>, Failure> {
    let b = text.as_bytes();
    let skip = |mut i: usize, keep: &dyn Fn(u8) -> bool| {
        while i < b.len() && keep(b[i]) {
            i += 1;
        }
        i
    };
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        if c.is_ascii_whitespace() || c == b',' {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            i = skip(i, &|c| c.is_ascii_digit());
            match b.get(i) {
                Some(b':') => {
                    i = skip(i, &|c| c.is_ascii_digit() || c == b':' || c == b'.');
                    tokens.push(Token::Time(&text[start..i]));
                }
                Some(&separator @ (b'-' | b'/' | b'.'))
                    if b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) =>
                {
                    i = date_end(b, start, separator);
                    tokens.push(date_token(&text[start..i], separator));
                }
                _ => tokens.push(Token::Number(&text[start..i])),
            }
        } else if c.is_ascii_alphabetic() {
            i = skip(i, &|c| c.is_ascii_alphabetic() || c == b'/' || c == b'_');
            let word = &text[start..i];
            let next = b.get(i).copied();
            if word.eq_ignore_ascii_case("t") && next.is_some_and(|c| c.is_ascii_digit()) {
                // ISO 8601's `T` between a date and its time.
                continue;
            }
            match next {
                // A month's name first in a date of parts: `Mar-15-2024`.
                Some(separator @ (b'-' | b'/'))
                    if b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) =>
                {
                    i = date_end(b, start, separator);
                    tokens.push(date_token(&text[start..i], separator));
                }
                _ => tokens.push(Token::Word(word)),
            }
        } else if c == b'+' || c == b'-' {
            i = skip(i + 1, &|c| c.is_ascii_digit() || c == b':');
            if i == start + 1 {
                return Err(Failure::Syntax);
            }
            tokens.push(Token::Offset(c == b'+', &text[start + 1..i]));
        } else {
            return Err(Failure::Syntax);
        }
    }
    Ok(tokens)
}

/// A date of parts (`2024-03-15`, `Mar-15-2024`) as its parts.
fn date_token(date: &str, separator: u8) -> Token<'_> {
    Token::Date(date.split(separator as char).collect())
}

/// Where a date of parts starting at `start` ends: runs of digits or of
/// letters (never both: `15T10` is the day 15 and ISO 8601's `T`), each
/// followed by `separator` and another.
fn date_end(b: &[u8], start: usize, separator: u8) -> usize {
    let mut i = start;
    loop {
        let letters = b[i].is_ascii_alphabetic();
        while i < b.len() && b[i].is_ascii_alphanumeric() && b[i].is_ascii_alphabetic() == letters {
            i += 1;
        }
        if b.get(i) == Some(&separator) && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) {
            i += 1;
        } else {
            return i;
        }
    }
}

/// The fields read so far.
#[derive(Debug, Default)]
struct Fields<'a> {
    /// The year as written, and how many digits it had.
    year: Option<(i64, usize)>,
    month: Option<u32>,
    day: Option<u32>,
    /// A day of the year (`2024.075`), in place of month and day.
    day_of_year: Option<u32>,
    /// Days from today (`today`, `tomorrow`, `yesterday`).
    from_today: Option<i64>,
    /// Numbers not yet placed: the day and the year after a month's name.
    loose: Vec<&'a str>,
    /// Hours, minutes, seconds and microseconds.
    clock: Option<(u32, u32, u32, u32)>,
    /// `Some(true)` for PM.
    afternoon: Option<bool>,
    before_christ: bool,
    zone: Option<Zone>,
}

impl<'a> Fields<'a> {
    fn take(&mut self, token: Token<'a>) -> Result<(), Failure> {
        match token {
            Token::Date(parts) => self.date(&parts),
            Token::Number(digits) => match digits.len() {
                8 if !self.has_date() => self.ymd(&digits[..4], &digits[4..6], &digits[6..]),
                6 if !self.has_date() => self.ymd(&digits[..2], &digits[2..4], &digits[4..]),
                6 if self.clock.is_none() => {
                    self.time(&[&digits[..2], &digits[2..4], &digits[4..]])
                }
                _ => {
                    self.loose.push(digits);
                    Ok(())
                }
            },
            Token::Time(time) => self.time(&time.split(':').collect::<Vec<_>>()),
            Token::Word(word) => self.word(word),
            Token::Offset(east, offset) => {
                if self.zone.is_some() || self.clock.is_none() && !self.has_date() {
                    return Err(Failure::Syntax);
                }
                let seconds = offset_seconds(offset)?;
                self.zone = Some(Zone::Offset(if east { seconds } else { -seconds }));
                Ok(())
            }
        }
    }

    fn has_date(&self) -> bool {
        self.year.is_some() || self.from_today.is_some()
    }

    /// A date's parts: year, month and day in the orders of the module's
    /// comment.
    fn date(&mut self, parts: &[&'a str]) -> Result<(), Failure> {
        if self.has_date() || self.month.is_some() {
            return Err(Failure::Syntax);
        }
        let named = parts
            .iter()
            .position(|p| p.as_bytes()[0].is_ascii_alphabetic());
        let (year, month, day) = match (parts, named) {
            ([year, day_of_year], None) if year.len() >= 4 && day_of_year.len() == 3 => {
                self.year = Some(number(year)?);
                self.day_of_year = Some(field(day_of_year)?);
                return Ok(());
            }
            ([first, month, day], None) if first.len() > 2 => (*first, *month, *day),
            ([month, day, year], None) => (*year, *month, *day),
            ([month, day, year], Some(0)) => (*year, *month, *day),
            ([first, month, second], Some(1)) if first.len() > 2 => (*first, *month, *second),
            ([day, month, year], Some(1)) => (*year, *month, *day),
            _ => return Err(Failure::Syntax),
        };
        self.ymd(year, month, day)
    }

    fn ymd(&mut self, year: &str, month: &str, day: &str) -> Result<(), Failure> {
        if self.has_date() || self.month.is_some() {
            return Err(Failure::Syntax);
        }
        self.year = Some(number(year)?);
        self.month = Some(match month_named(month) {
            Some(m) => m,
            None => field(month)?,
        });
        self.day = Some(field(day)?);
        Ok(())
    }

    /// A time's parts: hours, minutes and seconds with their fraction.
    fn time(&mut self, parts: &[&str]) -> Result<(), Failure> {
        if self.clock.is_some() {
            return Err(Failure::Syntax);
        }
        let (hours, minutes, seconds) = match parts {
            [h, m] => (h, m, "0"),
            [h, m, s] => (h, m, *s),
            _ => return Err(Failure::Syntax),
        };
        let (seconds, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
        if hours.is_empty() || hours.len() > 2 || minutes.len() != 2 || seconds.is_empty() {
            return Err(Failure::Syntax);
        }
        let micros = fraction_micros(fraction)?;
        self.clock = Some((field(hours)?, field(minutes)?, field(seconds)?, micros));
        Ok(())
    }

    fn word(&mut self, word: &str) -> Result<(), Failure> {
        let lower = word.to_ascii_lowercase();
        if let Some(month) = month_named(word) {
            if self.month.is_some() {
                return Err(Failure::Syntax);
            }
            self.month = Some(month);
            return Ok(());
        }
        match lower.as_str() {
            "sunday" | "sun" | "monday" | "mon" | "tuesday" | "tue" | "tues" | "wednesday"
            | "wed" | "thursday" | "thu" | "thur" | "thurs" | "friday" | "fri" | "saturday"
            | "sat" => {}
            "am" | "pm" => {
                if self.afternoon.is_some() {
                    return Err(Failure::Syntax);
                }
                self.afternoon = Some(lower == "pm");
            }
            "bc" => self.before_christ = true,
            "ad" => {}
            "today" | "tomorrow" | "yesterday" if !self.has_date() && self.month.is_none() => {
                self.from_today = Some(match lower.as_str() {
                    "today" => 0,
                    "tomorrow" => 1,
                    _ => -1,
                });
            }
            "allballs" if self.clock.is_none() => self.clock = Some((0, 0, 0, 0)),
            _ if self.zone.is_none() => self.zone = Some(zone_named(word, &lower)?),
            _ => return Err(Failure::Syntax),
        }
        Ok(())
    }

    /// The fields as a day, a time and a zone, each checked.
    fn finish(mut self, target: Target) -> Result<Read, Failure> {
        let days = match self.from_today.take() {
            // A time of day written alone.
            None if target == Target::Time && !self.has_date() && self.month.is_none() => 0,
            Some(from_today) => {
                if self.year.is_some() || !self.loose.is_empty() {
                    return Err(Failure::Syntax);
                }
                let today = chrono::Utc::now()
                    .timestamp_micros()
                    .div_euclid(MICROS_A_DAY);
                today + from_today
            }
            None => self.day_number()?,
        };
        // PostgreSQL's dates run from 4714-11-24 BC to 5874897-12-31.
        if !(-2_440_588..=2_145_031_948).contains(&days) {
            return Err(Failure::Range);
        }
        let clock = match self.clock {
            None => 0,
            Some((hours, minutes, seconds, micros)) => {
                let hours = match self.afternoon {
                    None => hours,
                    Some(_) if hours > 12 || hours == 0 => return Err(Failure::Field),
                    Some(true) => hours % 12 + 12,
                    Some(false) => hours % 12,
                };
                let past_day = hours == 24 && (minutes, seconds, micros) != (0, 0, 0);
                if hours > 24 || minutes > 59 || seconds > 60 || past_day {
                    return Err(Failure::Field);
                }
                let seconds = i64::from((hours * 60 + minutes) * 60 + seconds);
                seconds * 1_000_000 + i64::from(micros)
            }
        };
        if self.afternoon.is_some() && self.clock.is_none() {
            return Err(Failure::Syntax);
        }
        let zone = match target {
            // A date ignores the time and the zone, a time the zone; only
            // their form counts.
            Target::Date | Target::Time => None,
            _ => self.zone,
        };
        Ok(Read { days, clock, zone })
    }

    /// The day the year, month and day (or day of the year) name, in days
    /// since 1970-01-01.
    fn day_number(&mut self) -> Result<i64, Failure> {
        if self.year.is_none() {
            // A month's name, then the day and the year in either order.
            let [first, second] = self.loose.as_slice() else {
                return Err(Failure::Syntax);
            };
            if self.month.is_none() {
                return Err(Failure::Syntax);
            }
            let (year, day) = if first.len() > 2 {
                (first, second)
            } else {
                (second, first)
            };
            self.year = Some(number(year)?);
            self.day = Some(field(day)?);
        } else if !self.loose.is_empty() {
            return Err(Failure::Syntax);
        }
        let Some((year, digits)) = self.year else {
            return Err(Failure::Syntax);
        };
        let year = match (digits, self.before_christ) {
            (2, false) if year < 70 => year + 2000,
            (2, false) => year + 1900,
            _ => year,
        };
        if year == 0 {
            return Err(Failure::Field);
        }
        // Beyond any date's year (PostgreSQL's last is 5874897): out of
        // range before the days are counted, which would overflow.
        if year > 10_000_000 {
            return Err(Failure::Range);
        }
        // Year 0 of the calendar is 1 BC.
        let year = if self.before_christ { 1 - year } else { year };
        if let Some(day_of_year) = self.day_of_year {
            let length = if is_leap(year) { 366 } else { 365 };
            if !(1..=length).contains(&day_of_year) {
                return Err(Failure::Field);
            }
            return Ok(days_from_civil(year, 1, 1) + i64::from(day_of_year) - 1);
        }
        let (Some(month), Some(day)) = (self.month, self.day) else {
            return Err(Failure::Syntax);
        };
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return Err(Failure::Field);
        }
        Ok(days_from_civil(year, month, day))
    }
}

/// The zone a word names: an abbreviation PostgreSQL's default set gives
/// a fixed offset (`PST`, `CEST`), or a zone of the IANA database, its
/// name in any case (`Europe/Paris`, `europe/paris`).
fn zone_named(word: &str, lower: &str) -> Result<Zone, Failure> {
    /// PostgreSQL 15's offsets (`pg_timezone_abbrevs`) of the
    /// abbreviations most used, in seconds east of UTC.
    const ABBREVIATIONS: [(&str, i64); 27] = [
        ("z", 0),
        ("zulu", 0),
        ("ut", 0),
        ("utc", 0),
        ("gmt", 0),
        ("wet", 0),
        ("bst", 3_600),
        ("cet", 3_600),
        ("cest", 7_200),
        ("eet", 7_200),
        ("eest", 10_800),
        ("jst", 32_400),
        ("aest", 36_000),
        ("aedt", 39_600),
        ("nzst", 43_200),
        ("nzdt", 46_800),
        ("hst", -36_000),
        ("akst", -32_400),
        ("akdt", -28_800),
        ("pst", -28_800),
        ("pdt", -25_200),
        ("mst", -25_200),
        ("mdt", -21_600),
        ("cst", -21_600),
        ("cdt", -18_000),
        ("est", -18_000),
        ("edt", -14_400),
    ];
    if let Some((_, offset)) = ABBREVIATIONS.iter().find(|(name, _)| *name == lower) {
        return Ok(Zone::Offset(*offset));
    }
    match super::time_zone::iana_name(word).and_then(|name| name.parse::<Tz>().ok()) {
        Some(tz) => Ok(Zone::Named(tz)),
        // A word with a `/` can only be a zone's name; another word is
        // not part of a date.
        None if word.contains('/') => Err(Failure::Zone(word.to_owned())),
        None => Err(Failure::Syntax),
    }
}

/// Digits as a number, with how many there were.
fn number(digits: &str) -> Result<(i64, usize), Failure> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Failure::Syntax);
    }
    // More digits than any field holds is a field out of range.
    let value = digits.parse::<i64>().map_err(|_| Failure::Field)?;
    Ok((value, digits.len()))
}

/// Digits as a month, a day or a part of a time.
fn field(digits: &str) -> Result<u32, Failure> {
    u32::try_from(number(digits)?.0).map_err(|_| Failure::Field)
}

/// A second's fraction in microseconds, rounded half up as PostgreSQL
/// rounds it.
fn fraction_micros(fraction: &str) -> Result<u32, Failure> {
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Failure::Syntax);
    }
    let mut micros = 0u32;
    for i in 0..6 {
        micros = micros * 10
            + fraction
                .as_bytes()
                .get(i)
                .map_or(0, |d| u32::from(d - b'0'));
    }
    let round_up = fraction.as_bytes().get(6).is_some_and(|&d| d >= b'5');
    Ok(micros + u32::from(round_up))
}

/// An offset's text (`02`, `5`, `05:30`, `0530`, `05:30:15`) in seconds;
/// PostgreSQL refuses one beyond 15:59:59.
fn offset_seconds(text: &str) -> Result<i64, Failure> {
    let parts: Vec<&str> = text.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [hhmm] if hhmm.len() == 4 => (&hhmm[..2], &hhmm[2..], "0"),
        [hours] if hours.len() <= 2 => (*hours, "0", "0"),
        [hours, minutes] => (*hours, *minutes, "0"),
        [hours, minutes, seconds] => (*hours, *minutes, *seconds),
        _ => return Err(Failure::Syntax),
    };
    let (hours, minutes, seconds) = (number(hours)?.0, number(minutes)?.0, number(seconds)?.0);
    if minutes > 59 || seconds > 59 {
        return Err(Failure::Field);
    }
    if hours > 15 {
        return Err(Failure::Displacement);
    }
    Ok((hours * 60 + minutes) * 60 + seconds)
}

/// The month a name or its abbreviation names, in any case.
fn month_named(word: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let word = word.to_ascii_lowercase();
    if word == "sept" {
        return Some(9);
    }
    MONTHS
        .iter()
        .position(|m| *m == word || (word.len() == 3 && m.starts_with(word.as_str())))
        .map(|i| i as u32 + 1)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar,
/// year 0 being 1 BC (Howard Hinnant's `days_from_civil`, the inverse of
/// [`super::types::civil_date`]).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let march_month = i64::from((month + 9) % 12);
    let day_of_year = (153 * march_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text PostgreSQL 15 prints for the value `text` reads as, or the
    /// SQLSTATE of its error.
    fn check(text: &str, target: Target, want: &str) {
        let got = match target {
            Target::Date => read_date(text).map(|days| {
                let mut out = String::new();
                super::super::types::push_date(&mut out, i64::from(days));
                out
            }),
            _ => read_timestamp(text, target, &SessionZone::utc()).map(|micros| {
                super::super::types::timestamp_text(micros, target == Target::Timestamptz)
            }),
        };
        let got = match got {
            Ok(text) => text,
            Err(SqlError::InvalidValue { sqlstate, .. }) => sqlstate.to_owned(),
            Err(SqlError::FeatureNotSupported(_)) => "0A000".to_owned(),
            Err(e) => panic!("{text}: {e}"),
        };
        assert_eq!(got, want, "{text:?} as {target:?}");
    }

    #[test]
    fn dates_in_the_forms_postgresql_reads() {
        // Each answer is PostgreSQL 15's (DateStyle ISO, MDY), but for
        // infinity.
        for (text, want) in [
            ("2024-03-15", "2024-03-15"),
            (" 2024-03-15 ", "2024-03-15"),
            ("2024-03-15 10:30", "2024-03-15"),
            ("2024-02-29 +00", "2024-02-29"),
            ("2024-03-15T10:30:00Z", "2024-03-15"),
            ("3/15/2024", "2024-03-15"),
            ("03-15-2024", "2024-03-15"),
            ("3/15/24", "2024-03-15"),
            ("3/15/99", "1999-03-15"),
            ("20240315", "2024-03-15"),
            ("240315", "2024-03-15"),
            ("2024.075", "2024-03-15"),
            ("March 15, 2024", "2024-03-15"),
            ("15 March 2024", "2024-03-15"),
            ("Mar 15 2024", "2024-03-15"),
            ("15-Mar-2024", "2024-03-15"),
            ("Mar-15-2024", "2024-03-15"),
            ("2024-Mar-15", "2024-03-15"),
            ("Friday, March 15, 2024", "2024-03-15"),
            ("SEPT 1 2024", "2024-09-01"),
            ("0044-03-15 BC", "0044-03-15 BC"),
            // Month first: 44 is no month.
            ("44-03-15 BC", "22008"),
            ("0001-01-01 BC", "0001-01-01 BC"),
            ("2024-03-15 AD", "2024-03-15"),
            ("12345-01-02", "12345-01-02"),
            ("4714-11-24 BC", "4714-11-24 BC"),
            ("epoch", "1970-01-01"),
            ("EPOCH", "1970-01-01"),
            // Out of range, unreadable, refused.
            ("2024-13-01", "22008"),
            ("2024-02-30", "22008"),
            ("2023-02-29", "22008"),
            ("0000-01-01", "22008"),
            ("15/3/2024", "22008"),
            ("2024-03-15 25:00", "22008"),
            ("4714-11-23 BC", "22008"),
            ("5874898-01-01", "22008"),
            ("abc", "22007"),
            ("2024-03", "22007"),
            ("", "22007"),
            ("2024-03-15 xyz", "22007"),
            ("2024-03-15 Mars/Olympus", "22023"),
            ("10:30", "22007"),
            // PostgreSQL reads these; tablegate refuses them.
            ("infinity", "0A000"),
            ("-infinity", "0A000"),
        ] {
            check(text, Target::Date, want);
        }
    }

    #[test]
    fn timestamps_in_the_forms_postgresql_reads() {
        for (text, target, want) in [
            ("2024-03-15 10:30", Target::Timestamp, "2024-03-15 10:30:00"),
            ("2024-03-15 9:05", Target::Timestamp, "2024-03-15 09:05:00"),
            (
                "2024-03-15T10:30:05.25",
                Target::Timestamp,
                "2024-03-15 10:30:05.25",
            ),
            (
                "2024-03-15 10:30:05.1234567",
                Target::Timestamp,
                "2024-03-15 10:30:05.123457",
            ),
            (
                "2024-03-15 10:30+02",
                Target::Timestamp,
                "2024-03-15 10:30:00",
            ),
            ("2024-03-15", Target::Timestamp, "2024-03-15 00:00:00"),
            ("2024-03-15 24:00", Target::Timestamp, "2024-03-16 00:00:00"),
            (
                "2024-03-15 23:59:60",
                Target::Timestamp,
                "2024-03-16 00:00:00",
            ),
            (
                "March 15, 2024 10:30 PM",
                Target::Timestamp,
                "2024-03-15 22:30:00",
            ),
            (
                "3/15/2024 12:05 am",
                Target::Timestamp,
                "2024-03-15 00:05:00",
            ),
            ("20240315 103000", Target::Timestamp, "2024-03-15 10:30:00"),
            (
                "2024-03-15 allballs",
                Target::Timestamp,
                "2024-03-15 00:00:00",
            ),
            (
                "0044-03-15 10:00 BC",
                Target::Timestamp,
                "0044-03-15 10:00:00 BC",
            ),
            (
                "2024-03-15 10:30+02",
                Target::Timestamptz,
                "2024-03-15 08:30:00+00",
            ),
            (
                "2024-03-15 10:30:00-05:30",
                Target::Timestamptz,
                "2024-03-15 16:00:00+00",
            ),
            (
                "2024-03-15 10:30 +0530",
                Target::Timestamptz,
                "2024-03-15 05:00:00+00",
            ),
            (
                "2024-03-15T10:30:00Z",
                Target::Timestamptz,
                "2024-03-15 10:30:00+00",
            ),
            (
                "2024-03-15 10:30 UTC",
                Target::Timestamptz,
                "2024-03-15 10:30:00+00",
            ),
            (
                "2024-07-01 12:00 Europe/Paris",
                Target::Timestamptz,
                "2024-07-01 10:00:00+00",
            ),
            (
                "2024-01-15 12:00 America/New_York",
                Target::Timestamptz,
                "2024-01-15 17:00:00+00",
            ),
            (
                "2024-03-15 10:30",
                Target::Timestamptz,
                "2024-03-15 10:30:00+00",
            ),
            ("epoch", Target::Timestamptz, "1970-01-01 00:00:00+00"),
            (
                "2024-01-15 12:00 PST",
                Target::Timestamptz,
                "2024-01-15 20:00:00+00",
            ),
            (
                "2024-07-01 12:00 cest",
                Target::Timestamptz,
                "2024-07-01 10:00:00+00",
            ),
            (
                "2024-01-15 12:00 europe/paris",
                Target::Timestamptz,
                "2024-01-15 11:00:00+00",
            ),
            (
                "2024-01-15 12:00 PST",
                Target::Timestamp,
                "2024-01-15 12:00:00",
            ),
            ("2024-03-15 10:60", Target::Timestamp, "22008"),
            ("2024-03-15 24:00:01", Target::Timestamp, "22008"),
            ("2024-03-15 13:00 PM", Target::Timestamp, "22008"),
            ("2024-03-15 10:30+16", Target::Timestamptz, "22009"),
            (
                "2024-03-15 10:30 Nowhere/Land",
                Target::Timestamptz,
                "22023",
            ),
            ("2024-03-15 10:30:xx", Target::Timestamp, "22007"),
            ("10:30", Target::Timestamp, "22007"),
            ("soon", Target::Timestamptz, "22007"),
            ("300000-01-01", Target::Timestamp, "22008"),
            ("infinity", Target::Timestamptz, "0A000"),
        ] {
            check(text, target, want);
        }
    }

    #[test]
    fn the_plain_form_reads_as_its_tokens_do() {
        for text in [
            "2024-03-15",
            "2024-02-29 23:59:59",
            "2024-03-15T10:30:05.25",
            "2024-03-15 10:30:05.9999996",
            "0001-01-01 00:00:00Z",
            "2024-03-15 10:30:00-05:30",
            "2024-03-15 10:30:00+02",
            "9999-12-31 23:59:59.999999+0100",
        ] {
            let plain = plain_iso(text).expect(text);
            let mut fields = Fields::default();
            for token in tokens(text).unwrap() {
                fields.take(token).unwrap();
            }
            let read = fields.finish(Target::Timestamptz).unwrap();
            assert_eq!(
                plain.micros(Target::Timestamptz, &SessionZone::utc()),
                read.micros(Target::Timestamptz, &SessionZone::utc()),
                "{text}"
            );
        }
        for text in [
            "2024-02-30",
            "2024-03-15 24:00:00",
            "2024-03-15 10:30",
            "2024-3-15",
        ] {
            assert!(plain_iso(text).is_none(), "{text}");
        }
    }

    #[test]
    fn texts_read_as_timestamps_of_any_unit_and_zone() {
        use datafusion::arrow::array::{Array, AsArray};
        use datafusion::arrow::datatypes::{TimestampMillisecondType, TimestampNanosecondType};
        let texts = StringArray::from(vec![Some("2024-03-15 10:30+02"), None]);
        // An instant's zone only names how it is shown: the value is UTC's.
        let tokyo = DataType::Timestamp(TimeUnit::Millisecond, Some("Asia/Tokyo".into()));
        let read = read_texts(&texts, &tokyo, &SessionZone::utc()).unwrap();
        assert_eq!(read.data_type(), &tokyo);
        let utc =
            read_timestamp("2024-03-15 08:30", Target::Timestamp, &SessionZone::utc()).unwrap();
        let millis = read.as_primitive::<TimestampMillisecondType>();
        assert_eq!(millis.value(0), utc / 1_000);
        assert!(millis.is_null(1));
        let nanos = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let read = read_texts(&texts, &nanos, &SessionZone::utc()).unwrap();
        let wall =
            read_timestamp("2024-03-15 10:30", Target::Timestamp, &SessionZone::utc()).unwrap();
        assert_eq!(
            read.as_primitive::<TimestampNanosecondType>().value(0),
            wall * 1_000
        );
        // Beyond the years nanoseconds hold.
        let far = StringArray::from(vec!["2300-01-01"]);
        assert!(read_texts(&far, &nanos, &SessionZone::utc()).is_err());
    }

    /// PostgreSQL 15's instants, with `SET TimeZone = 'Europe/Paris'`.
    #[test]
    fn an_instant_without_a_zone_is_a_wall_time_in_the_session_zone() {
        let paris = SessionZone::of("Europe/Paris").unwrap();
        let instant = |text| {
            let micros = read_timestamp(text, Target::Timestamptz, &paris).unwrap();
            super::super::types::timestamp_text(micros, true)
        };
        assert_eq!(instant("2024-03-15 10:30"), "2024-03-15 09:30:00+00");
        assert_eq!(instant("2024-07-15 10:30"), "2024-07-15 08:30:00+00");
        assert_eq!(instant("2024-03-15 10:30+00"), "2024-03-15 10:30:00+00");
        assert_eq!(
            instant("2024-03-15 10:30 America/New_York"),
            "2024-03-15 14:30:00+00"
        );
        // Skipped, then repeated, wall times: the offsets PostgreSQL takes.
        assert_eq!(instant("2024-03-31 02:30"), "2024-03-31 01:30:00+00");
        assert_eq!(instant("2024-10-27 02:30"), "2024-10-27 01:30:00+00");
        assert_eq!(
            instant("2024-03-10 02:30 America/New_York"),
            "2024-03-10 07:30:00+00"
        );
        assert_eq!(
            instant("2024-11-03 01:30 America/New_York"),
            "2024-11-03 06:30:00+00"
        );
        // A timestamp's or a date's text is a wall time in any zone.
        let wall = read_timestamp("2024-03-15 10:30", Target::Timestamp, &paris).unwrap();
        assert_eq!(
            super::super::types::timestamp_text(wall, false),
            "2024-03-15 10:30:00"
        );
    }

    proptest::proptest! {
        /// Any text is read or refused, never a panic: the reader runs on
        /// every client's input.
        #[test]
        fn any_text_is_read_or_refused(text in "[0-9a-zA-Z :./,+_-]{0,40}|\\PC{0,20}") {
            for target in [Target::Date, Target::Timestamp, Target::Timestamptz] {
                let _ = read(&text, target).and_then(|r| r.micros(target, &SessionZone::utc()));
                let _ = arrow_text(&text, target, &SessionZone::utc());
            }
        }
    }

    #[test]
    fn years_beyond_any_date_are_out_of_range() {
        check("99999999999999999-01-01", Target::Date, "22008");
        check("January 1, 99999999999999999", Target::Timestamp, "22008");
        check("99999999999999999.001", Target::Date, "22008");
    }

    #[test]
    fn words_for_days_count_from_today() {
        let today = chrono::Utc::now().date_naive();
        let day = |days: i64| (today + chrono::Duration::days(days)).to_string();
        check("today", Target::Date, &day(0));
        check("Tomorrow", Target::Date, &day(1));
        check("yesterday", Target::Date, &day(-1));
        check(
            "tomorrow 10:00",
            Target::Timestamp,
            &format!("{} 10:00:00", day(1)),
        );
    }

    #[test]
    fn texts_for_arrow_name_the_same_value() {
        for (text, target, want) in [
            (
                "2024-03-15 9:05",
                Target::Timestamp,
                "2024-03-15T09:05:00.000000",
            ),
            (
                "2024-03-15 10:30+02",
                Target::Timestamptz,
                "2024-03-15T08:30:00.000000+00:00",
            ),
            ("March 15, 2024", Target::Date, "2024-03-15"),
            ("0044-03-15 BC", Target::Date, "-0043-03-15"),
            ("0044-03-15 BC", Target::Timestamp, "0044-03-15 BC"),
            ("abc", Target::Date, "abc"),
        ] {
            assert_eq!(
                arrow_text(text, target, &SessionZone::utc()),
                want,
                "{text}"
            );
        }
    }
}
