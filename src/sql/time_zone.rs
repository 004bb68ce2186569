//! The session's time zone, `SET TimeZone`, as PostgreSQL follows it: an
//! instant (a `timestamptz`) is shown in it with its offset there
//! (`2024-03-16 00:30:00+01`), a text without an offset is read as a wall
//! time in it, and the casts between `timestamptz`, `timestamp` and `date`,
//! `date_trunc` and `extract` of an instant take their wall times in it.
//!
//! A zone is a name of the IANA database (`Europe/Paris`, in any case) or
//! an offset east of UTC (`+02`, `-03:30`, `SET TIME ZONE 5`), as
//! PostgreSQL takes them; its POSIX forms (`UTC+3`, which is 3 hours
//! *west*) are refused rather than read with the sign the other way.

use std::sync::Arc;

use chrono::{Offset, TimeZone};
use datafusion::arrow::array::timezone::Tz;

/// A session's time zone (see the module's comment).
#[derive(Clone, Debug)]
pub struct SessionZone {
    /// The zone as Arrow's `Tz` reads it (`Europe/Paris`, `+02:00`).
    name: Arc<str>,
    tz: Tz,
    /// Whether it is UTC under one of its names: its instants' wall times
    /// need no shift.
    utc: bool,
}

impl PartialEq for SessionZone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for SessionZone {}

impl std::hash::Hash for SessionZone {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl Default for SessionZone {
    fn default() -> Self {
        SessionZone::utc()
    }
}

impl SessionZone {
    pub fn utc() -> SessionZone {
        static UTC: std::sync::LazyLock<SessionZone> =
            std::sync::LazyLock::new(|| SessionZone::of(super::types::UTC).expect("UTC is a zone"));
        UTC.clone()
    }

    /// The zone Arrow's `Tz` reads `name` as (see [`Self::name`]).
    pub fn of(name: &str) -> Option<SessionZone> {
        let tz = name.parse::<Tz>().ok()?;
        let utc = matches!(
            name,
            super::types::UTC
                | "UTC"
                | "Etc/UTC"
                | "UCT"
                | "Etc/UCT"
                | "GMT"
                | "Etc/GMT"
                | "Zulu"
                | "Etc/Zulu"
                | "Universal"
                | "Etc/Universal"
        );
        Some(SessionZone {
            name: name.into(),
            tz,
            utc,
        })
    }

    /// The zone a `SET TimeZone` value names, and the value as PostgreSQL
    /// shows it back (`Europe/Paris` for `europe/paris`, `<+02>-02` for
    /// `+2`); `Err` says why the value is not taken, `Ok(None)` that it is
    /// not a zone.
    pub fn setting(value: &str) -> Result<Option<(SessionZone, String)>, String> {
        let value = value.trim();
        // The form it is shown in (`<+02>-02`) reads as its offset.
        let value = match value.strip_prefix('<').and_then(|v| v.split_once('>')) {
            Some((offset, _)) => offset,
            None => value,
        };
        if let Some(seconds) = offset_setting(value) {
            let (sign, magnitude) = if seconds < 0 {
                ('-', -seconds)
            } else {
                ('+', seconds)
            };
            let (hours, minutes) = (magnitude / 3600, magnitude / 60 % 60);
            let name = format!("{sign}{hours:02}:{minutes:02}");
            let mut shown = String::new();
            push_offset(&mut shown, seconds);
            // PostgreSQL shows an offset as a POSIX zone, whose sign is
            // the other way: `<+02>-02`.
            let mut posix = String::new();
            push_offset(&mut posix, -seconds);
            let zone = SessionZone::of(&name).ok_or("an offset is a zone")?;
            return Ok(Some((zone, format!("<{shown}>{posix}"))));
        }
        if let Some(zone) = iana_name(value).and_then(|name| Some((SessionZone::of(&name)?, name)))
        {
            return Ok(Some(zone));
        }
        if value.contains(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "time zone \"{value}\" is not supported: tablegate takes a zone's name \
                 (Europe/Paris) or an offset east of UTC (+02, -03:30), not POSIX's forms"
            ));
        }
        Ok(None)
    }

    /// The name Arrow's `Tz` reads (an IANA name, or `+hh:mm`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the zone is UTC under one of its names.
    pub fn is_utc(&self) -> bool {
        self.utc
    }

    /// The zone's offset east of UTC, in seconds, at an instant
    /// (microseconds since 1970 in UTC); 0 beyond chrono's range.
    pub fn offset_at(&self, utc_micros: i64) -> i32 {
        chrono::DateTime::from_timestamp_micros(utc_micros).map_or(0, |utc| {
            self.tz
                .offset_from_utc_datetime(&utc.naive_utc())
                .fix()
                .local_minus_utc()
        })
    }

    /// The instant (microseconds since 1970 in UTC) a wall time in the
    /// zone is (microseconds since 1970 on the zone's clock). A wall time
    /// a change of offset skips is read with the offset before the
    /// change, one it repeats with the offset after: PostgreSQL's choice
    /// (`2024-03-31 02:30` in Paris is 01:30 UTC, and so is `2024-10-27
    /// 02:30`).
    pub fn instant_of(&self, wall_micros: i64) -> Option<i64> {
        instant_of(&self.tz, wall_micros)
    }
}

/// [`SessionZone::instant_of`] in any zone.
pub(super) fn instant_of(tz: &Tz, wall_micros: i64) -> Option<i64> {
    let wall = chrono::DateTime::from_timestamp_micros(wall_micros)?.naive_utc();
    let offset = match tz.offset_from_local_datetime(&wall) {
        chrono::LocalResult::Single(offset) | chrono::LocalResult::Ambiguous(_, offset) => offset,
        // A day before, the offset before the change (offsets change at
        // most twice a year).
        chrono::LocalResult::None => tz.offset_from_utc_datetime(&(wall - chrono::Days::new(1))),
    };
    wall_micros.checked_sub(i64::from(offset.fix().local_minus_utc()) * 1_000_000)
}

/// An offset east of UTC in seconds, as PostgreSQL prints it after a
/// `timestamptz`: `+01`, `-03:30`, `+00:09:21` (the minutes and seconds
/// only when they are not zero).
pub fn push_offset(out: &mut impl std::fmt::Write, seconds: i32) {
    let sign = if seconds < 0 { '-' } else { '+' };
    let magnitude = seconds.unsigned_abs();
    let (hours, minutes, seconds) = (magnitude / 3600, magnitude / 60 % 60, magnitude % 60);
    let _ = write!(out, "{sign}{hours:02}");
    if minutes != 0 || seconds != 0 {
        let _ = write!(out, ":{minutes:02}");
    }
    if seconds != 0 {
        let _ = write!(out, ":{seconds:02}");
    }
}

/// A zone of the IANA database named in any case, by its name as the
/// database spells it (`europe/paris` is `Europe/Paris`).
pub(super) fn iana_name(word: &str) -> Option<String> {
    if word.is_empty() {
        return None;
    }
    if word.parse::<Tz>().is_ok() && !word.starts_with(['+', '-']) {
        return Some(word.to_owned());
    }
    // The database's names capitalize each word: `America/New_York`.
    let capitalized: String = word
        .split_inclusive(['/', '_'])
        .map(|part| {
            let (first, rest) = part.split_at(part.chars().next().map_or(0, char::len_utf8));
            first.to_ascii_uppercase() + &rest.to_ascii_lowercase()
        })
        .collect();
    let upper = word.to_ascii_uppercase();
    [capitalized, upper]
        .into_iter()
        .find(|name| name.parse::<Tz>().is_ok())
}

/// The seconds east of UTC a `SET TimeZone` value gives as a number
/// (`5`, `-3.5`, what `SET TIME ZONE 5` sets) or an ISO offset (`+02`,
/// `-03:30`, `+0530`).
fn offset_setting(value: &str) -> Option<i32> {
    if let Ok(hours) = value.parse::<f64>() {
        return (hours.is_finite() && hours.abs() < 24.0).then(|| (hours * 3600.0).round() as i32);
    }
    let (sign, digits) = match value.as_bytes().first()? {
        b'+' => (1, &value[1..]),
        b'-' => (-1, &value[1..]),
        _ => return None,
    };
    let (hours, minutes) = match digits.split_once(':') {
        Some((hours, minutes)) => (hours, minutes),
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "0"),
    };
    let all_digits =
        |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(hours) || !all_digits(minutes) {
        return None;
    }
    let (hours, minutes): (i32, i32) = (hours.parse().ok()?, minutes.parse().ok()?);
    (minutes < 60).then_some(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(value: &str) -> Option<String> {
        SessionZone::setting(value)
            .ok()
            .flatten()
            .map(|(_, shown)| shown)
    }

    /// Each as PostgreSQL 15 shows it back (`SET TimeZone = ...; SHOW
    /// TimeZone`).
    #[test]
    fn a_setting_names_a_zone_or_an_offset() {
        assert_eq!(shown("Europe/Paris").as_deref(), Some("Europe/Paris"));
        assert_eq!(shown("europe/paris").as_deref(), Some("Europe/Paris"));
        assert_eq!(
            shown("america/new_york").as_deref(),
            Some("America/New_York")
        );
        assert_eq!(shown("utc").as_deref(), Some("UTC"));
        assert_eq!(shown("+02").as_deref(), Some("<+02>-02"));
        assert_eq!(shown("5").as_deref(), Some("<+05>-05"));
        assert_eq!(shown("-03:30").as_deref(), Some("<-03:30>+03:30"));
        assert_eq!(shown("<-03:30>+03:30").as_deref(), Some("<-03:30>+03:30"));
        assert_eq!(shown("EST5EDT").as_deref(), Some("EST5EDT"));
        assert_eq!(shown("Nowhere/Land"), None);
        assert_eq!(shown("PST"), None);
        assert!(SessionZone::setting("UTC+3").is_err());
    }

    #[test]
    fn offsets_are_printed_as_postgresql_prints_them() {
        for (seconds, text) in [
            (3600, "+01"),
            (-12600, "-03:30"),
            (561, "+00:09:21"),
            (0, "+00"),
        ] {
            let mut out = String::new();
            push_offset(&mut out, seconds);
            assert_eq!(out, text);
        }
    }

    /// PostgreSQL 15's instants of these wall times in these zones.
    #[test]
    fn a_wall_time_skipped_or_repeated_takes_postgresql_offset() {
        let micros = |text: &str| {
            let wall = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap();
            wall.and_utc().timestamp_micros()
        };
        let cases = [
            ("Europe/Paris", "2024-03-31 02:30", "2024-03-31 01:30"),
            ("Europe/Paris", "2024-10-27 02:30", "2024-10-27 01:30"),
            ("Europe/Paris", "2024-03-15 10:30", "2024-03-15 09:30"),
            ("America/New_York", "2024-03-10 02:30", "2024-03-10 07:30"),
            ("America/New_York", "2024-11-03 01:30", "2024-11-03 06:30"),
        ];
        for (zone, wall, utc) in cases {
            let zone = SessionZone::of(zone).unwrap();
            assert_eq!(zone.instant_of(micros(wall)), Some(micros(utc)), "{wall}");
        }
        let paris = SessionZone::of("Europe/Paris").unwrap();
        assert_eq!(paris.offset_at(micros("2024-03-15 23:30")), 3600);
        assert_eq!(paris.offset_at(micros("2024-07-15 23:30")), 7200);
    }
}
