//! A session's run-time parameters, as PostgreSQL clients see them: `SET`,
//! `SHOW`, `RESET`, `current_setting()`, `set_config()` and `pg_settings`
//! all read and write the same map. Parameters tablegate does not act on are
//! still kept and shown, since clients set them and read them back.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::time_zone::SessionZone;

/// The PostgreSQL version tablegate answers as (clients check the major one).
pub const SERVER_VERSION: &str = "15.0";
pub const SERVER_VERSION_NUM: &str = "150000";

/// The parameters a session starts with: (name, value).
const DEFAULTS: &[(&str, &str)] = &[
    ("application_name", ""),
    ("block_size", "8192"),
    ("default_table_access_method", "heap"),
    ("default_tablespace", ""),
    ("client_encoding", "UTF8"),
    ("client_min_messages", "notice"),
    ("datestyle", "ISO, MDY"),
    ("default_transaction_isolation", "read committed"),
    ("default_transaction_read_only", "off"),
    ("extra_float_digits", "1"),
    ("idle_in_transaction_session_timeout", "0"),
    ("integer_datetimes", "on"),
    ("intervalstyle", "postgres"),
    ("is_superuser", "on"),
    ("lc_collate", "C.UTF-8"),
    ("lc_ctype", "C.UTF-8"),
    ("lc_messages", "C.UTF-8"),
    ("lc_monetary", "C.UTF-8"),
    ("lc_numeric", "C.UTF-8"),
    ("lc_time", "C.UTF-8"),
    ("max_identifier_length", "63"),
    ("max_index_keys", "32"),
    ("search_path", "\"$user\", public"),
    ("server_encoding", "UTF8"),
    ("server_version", SERVER_VERSION),
    ("server_version_num", SERVER_VERSION_NUM),
    ("session_replication_role", "origin"),
    ("standard_conforming_strings", "on"),
    ("statement_timeout", "0"),
    ("tablegate.column_copies", "on"),
    ("tablegate.pushdown", "on"),
    ("timezone", "UTC"),
    ("transaction_isolation", "read committed"),
    ("transaction_read_only", "off"),
];

/// Parameters that only the server sets.
const READ_ONLY: &[&str] = &[
    "block_size",
    "integer_datetimes",
    "max_index_keys",
    "session_authorization",
    "is_superuser",
    "lc_collate",
    "lc_ctype",
    "max_identifier_length",
    "server_encoding",
    "server_version",
    "server_version_num",
];

/// The parameters a client is told the values of, at login and whenever
/// they change (ParameterStatus), under the names PostgreSQL reports them
/// by: its `GUC_REPORT` parameters.
pub const REPORTED: &[&str] = &[
    "application_name",
    "client_encoding",
    "DateStyle",
    "default_transaction_read_only",
    "integer_datetimes",
    "IntervalStyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "TimeZone",
];

/// A parameter's name as PostgreSQL spells it, as SHOW's column and
/// `pg_settings` give it: `TimeZone` for `timezone` (the names it spells
/// with capitals are all [`REPORTED`]; the others are in lower case).
pub fn spelling(name: &str) -> String {
    match REPORTED.iter().find(|r| r.eq_ignore_ascii_case(name)) {
        Some(reported) => (*reported).to_owned(),
        None => name.to_lowercase(),
    }
}

/// A session's parameters; cheap to clone, shared with the functions that
/// read and set them.
#[derive(Clone)]
pub struct Settings(Arc<RwLock<Parameters>>);

struct Parameters {
    values: BTreeMap<String, String>,
    /// What the session started with, for RESET.
    initial: BTreeMap<String, String>,
    /// The switches `values` hold, read on every scan.
    switches: Switches,
    /// The zone `timezone` names.
    zone: SessionZone,
    /// The values of the [`REPORTED`] parameters the client was last told.
    told: Vec<Option<String>>,
    /// Whether `values` changed since the client was last told.
    changed: bool,
}

impl Parameters {
    /// Reads again what `values` hold.
    fn refresh(&mut self) {
        self.changed = true;
        self.switches = Switches::of(&self.values);
        self.zone = self
            .values
            .get("timezone")
            .and_then(|zone| SessionZone::setting(zone).ok().flatten())
            .map(|(zone, _)| zone)
            .unwrap_or_default();
    }

    fn reported_values(&self) -> Vec<Option<String>> {
        REPORTED
            .iter()
            .map(|name| self.values.get(&name.to_lowercase()).cloned())
            .collect()
    }
}

/// tablegate's own boolean parameters, which choose the access paths scans
/// take, for comparing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    /// `tablegate.pushdown`: key predicates become point gets and ranges
    /// (off: every scan reads its whole table).
    pub pushdown: bool,
    /// `tablegate.column_copies`: whole-table scans read a table's column
    /// copy when it is current (off: they read the store's records).
    pub column_copies: bool,
}

const SWITCHES: &[&str] = &["tablegate.column_copies", "tablegate.pushdown"];

/// Parameters whose values are durations.
const DURATIONS: &[&str] = &["idle_in_transaction_session_timeout", "statement_timeout"];

impl Switches {
    /// The switches some parameters hold (on unless set off).
    fn of(values: &BTreeMap<String, String>) -> Switches {
        let on = |name: &str| values.get(name).and_then(|v| boolean(v)) != Some(false);
        Switches {
            pushdown: on("tablegate.pushdown"),
            column_copies: on("tablegate.column_copies"),
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.all()).finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::for_user("")
    }
}

impl Settings {
    /// A session's parameters, `session_authorization` being its user.
    pub fn for_user(user: &str) -> Self {
        let mut initial: BTreeMap<String, String> = DEFAULTS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        initial.insert("session_authorization".into(), user.to_owned());
        // What `values` hold is read by `refresh`.
        let mut parameters = Parameters {
            switches: Switches::default(),
            zone: SessionZone::utc(),
            values: initial.clone(),
            initial,
            told: Vec::new(),
            changed: false,
        };
        parameters.refresh();
        parameters.told = parameters.reported_values();
        Settings(Arc::new(RwLock::new(parameters)))
    }
}

/// Why a parameter cannot be set.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Only the server sets it (SQLSTATE 55P02).
    ReadOnly(String),
    /// Not a value of the parameter's type (22023); the message says why.
    Invalid(String),
    /// A value PostgreSQL takes that tablegate does not act on, refused
    /// rather than kept and ignored (0A000); the message says why.
    Unsupported(String),
}

impl Settings {
    pub fn get(&self, name: &str) -> Option<String> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values
            .get(&name.to_lowercase())
            .cloned()
    }

    /// Sets a parameter (any name: clients set their own, like `myapp.user`).
    pub fn set(&self, name: &str, value: &str) -> Result<(), Refused> {
        let name = name.to_lowercase();
        if READ_ONLY.contains(&name.as_str()) {
            return Err(Refused::ReadOnly(name));
        }
        if DURATIONS.contains(&name.as_str()) && duration_ms(value).is_none() {
            return Err(Refused::Invalid(format!(
                "invalid value for parameter \"{name}\": \"{value}\""
            )));
        }
        if SWITCHES.contains(&name.as_str()) && boolean(value).is_none() {
            return Err(Refused::Invalid(format!(
                "parameter \"{name}\" requires a Boolean value"
            )));
        }
        let value = match name.as_str() {
            "datestyle" => date_style(value)?,
            "timezone" => time_zone(value)?,
            "session_replication_role" => replication_role(value)?,
            _ => value.to_owned(),
        };
        let mut parameters = self.0.write().unwrap_or_else(|e| e.into_inner());
        parameters.values.insert(name, value);
        parameters.refresh();
        Ok(())
    }

    /// Takes a client's startup parameters (`TimeZone`, `DateStyle`,
    /// `application_name`, and those its `options` give as `-c
    /// name=value`) as the session's starting values, which RESET goes
    /// back to, as PostgreSQL does; returns those not taken, and why.
    pub fn start_with<'a>(
        &self,
        parameters: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Vec<(String, Refused)> {
        let mut given = Vec::new();
        for (name, value) in parameters {
            match name.as_str() {
                "user" | "database" | "replication" => {}
                "options" => given.extend(command_line_settings(value)),
                _ => given.push((name.clone(), value.clone())),
            }
        }
        let mut refused = Vec::new();
        for (name, value) in given {
            match self.set(&name, &value) {
                Ok(()) => {
                    let mut parameters = self.0.write().unwrap_or_else(|e| e.into_inner());
                    let name = name.to_lowercase();
                    if let Some(value) = parameters.values.get(&name).cloned() {
                        parameters.initial.insert(name, value);
                    }
                }
                Err(why) => refused.push((name, why)),
            }
        }
        // The login tells the client these.
        let mut parameters = self.0.write().unwrap_or_else(|e| e.into_inner());
        parameters.told = parameters.reported_values();
        refused
    }

    /// The [`REPORTED`] parameters whose values changed since the client
    /// was last told them, with their values now (a parameter gone is
    /// told as empty); the client is taken to be told these.
    pub fn changes_to_tell(&self) -> Vec<(&'static str, String)> {
        if !self.0.read().unwrap_or_else(|e| e.into_inner()).changed {
            return Vec::new();
        }
        let mut parameters = self.0.write().unwrap_or_else(|e| e.into_inner());
        parameters.changed = false;
        let now = parameters.reported_values();
        let changes = (REPORTED.iter().zip(now.iter().zip(&parameters.told)))
            .filter(|(_, (now, told))| now != told)
            .map(|(name, (now, _))| (*name, now.clone().unwrap_or_default()))
            .collect();
        parameters.told = now;
        changes
    }

    /// The zone `TimeZone` names.
    pub fn zone(&self) -> SessionZone {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .zone
            .clone()
    }

    /// The switches' current values.
    pub fn switches(&self) -> Switches {
        self.0.read().unwrap_or_else(|e| e.into_inner()).switches
    }

    /// Back to the session's starting value (or gone, for a parameter
    /// without one).
    pub fn reset(&self, name: &str) {
        let name = name.to_lowercase();
        let mut parameters = self.0.write().unwrap_or_else(|e| e.into_inner());
        match parameters.initial.get(&name).cloned() {
            Some(v) => {
                parameters.values.insert(name, v);
            }
            None => {
                parameters.values.remove(&name);
            }
        }
        parameters.refresh();
    }

    pub fn reset_all(&self) {
        let mut parameters = self.0.write().unwrap_or_else(|e| e.into_inner());
        parameters.values = parameters.initial.clone();
        parameters.refresh();
    }

    /// Every parameter, by name (as PostgreSQL spells it).
    pub fn all(&self) -> Vec<(String, String)> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values
            .iter()
            .map(|(k, v)| (spelling(k), v.clone()))
            .collect()
    }
}

/// The settings a startup packet's `options` gives, as a server's command
/// line would: `-c name=value` or `--name=value`, separated by spaces (a
/// space inside a value escaped with a backslash).
fn command_line_settings(options: &str) -> Vec<(String, String)> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                words.extend((!word.is_empty()).then(|| std::mem::take(&mut word)))
            }
            c => word.push(c),
        }
    }
    words.extend((!word.is_empty()).then_some(word));
    let mut settings = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let setting = match word.as_str() {
            "-c" => words.next(),
            _ => word.strip_prefix("--").map(str::to_owned),
        };
        if let Some((name, value)) = setting.as_deref().and_then(|s| s.split_once('=')) {
            settings.push((name.replace('-', "_"), value.to_owned()));
        }
    }
    settings
}

/// A `TimeZone` as PostgreSQL writes it back (see [`SessionZone::setting`]).
fn time_zone(value: &str) -> Result<String, Refused> {
    match SessionZone::setting(value) {
        Ok(Some((_, shown))) => Ok(shown),
        Ok(None) => Err(Refused::Invalid(format!(
            "invalid value for parameter \"TimeZone\": \"{value}\""
        ))),
        Err(message) => Err(Refused::Unsupported(message)),
    }
}

/// A `DateStyle` as PostgreSQL writes it back (`mdy` is `ISO, MDY`).
/// tablegate prints dates as ISO 8601 and reads day and month in the
/// order month first: a style that would print them otherwise or read
/// `03/04/2024` as the 3rd of April is refused, not kept and ignored.
fn date_style(value: &str) -> Result<String, Refused> {
    let words = value
        .split([',', ' ', '\''])
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase);
    for word in words {
        match word.as_str() {
            "iso" | "mdy" | "us" | "noneuropean" | "non-european" | "default" => {}
            "sql" | "postgres" | "german" | "dmy" | "ymd" | "euro" | "european" => {
                return Err(Refused::Unsupported(format!(
                    "DateStyle \"{value}\" is not supported: tablegate prints dates as ISO \
                     8601 and reads them month first (ISO, MDY)"
                )))
            }
            _ => {
                return Err(Refused::Invalid(format!(
                    "invalid value for parameter \"DateStyle\": \"{value}\""
                )))
            }
        }
    }
    Ok("ISO, MDY".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_startup_parameters_are_the_session_starting_values() {
        let s = Settings::default();
        let given: std::collections::HashMap<String, String> = [
            ("user", "ann"),
            ("TimeZone", "europe/paris"),
            ("application_name", "report"),
            (
                "options",
                "-c search_path=sales,public --statement-timeout=5s -c x.y=a\\ b",
            ),
            ("DateStyle", "German"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let refused = s.start_with(&given);
        assert_eq!(s.get("timezone").as_deref(), Some("Europe/Paris"));
        assert_eq!(s.zone().name(), "Europe/Paris");
        assert_eq!(s.get("application_name").as_deref(), Some("report"));
        assert_eq!(s.get("search_path").as_deref(), Some("sales,public"));
        assert_eq!(s.get("statement_timeout").as_deref(), Some("5s"));
        assert_eq!(s.get("x.y").as_deref(), Some("a b"));
        assert_eq!(s.get("user"), None);
        // A style tablegate does not follow is not taken.
        assert!(
            matches!(refused.as_slice(), [(name, Refused::Unsupported(_))] if name == "DateStyle")
        );
        assert_eq!(s.get("datestyle").as_deref(), Some("ISO, MDY"));
        // RESET goes back to the values the client started with.
        s.set("TimeZone", "UTC").unwrap();
        s.reset("TimeZone");
        assert_eq!(s.zone().name(), "Europe/Paris");
        s.reset_all();
        assert_eq!(s.get("application_name").as_deref(), Some("report"));
    }

    #[test]
    fn the_client_is_told_the_reported_parameters_that_changed() {
        let s = Settings::for_user("ann");
        let given: BTreeMap<String, String> = [("TimeZone".into(), "Asia/Tokyo".into())].into();
        s.start_with(&given);
        // The login told the starting values.
        assert_eq!(s.changes_to_tell(), []);
        s.set("search_path", "x").unwrap();
        assert_eq!(s.changes_to_tell(), []);
        s.set("timezone", "europe/paris").unwrap();
        s.set("application_name", "report").unwrap();
        assert_eq!(
            s.changes_to_tell(),
            [
                ("application_name", "report".into()),
                ("TimeZone", "Europe/Paris".into())
            ]
        );
        assert_eq!(s.changes_to_tell(), []);
        // Set back to what the client was told: nothing to tell.
        s.set("application_name", "other").unwrap();
        s.set("application_name", "report").unwrap();
        assert_eq!(s.changes_to_tell(), []);
        s.reset_all();
        assert_eq!(
            s.changes_to_tell(),
            [
                ("application_name", String::new()),
                ("TimeZone", "Asia/Tokyo".into())
            ]
        );
    }

    #[test]
    fn only_the_date_style_tablegate_follows_is_taken() {
        let s = Settings::default();
        for style in ["ISO, MDY", "mdy", "'iso'", "US", "ISO,MDY"] {
            s.set("DateStyle", style).unwrap();
            assert_eq!(s.get("datestyle").as_deref(), Some("ISO, MDY"), "{style}");
        }
        for style in ["ISO, DMY", "German", "SQL, MDY", "ymd"] {
            let refused = s.set("DateStyle", style);
            assert!(matches!(refused, Err(Refused::Unsupported(_))), "{style}");
        }
        let refused = s.set("DateStyle", "sideways");
        assert!(matches!(refused, Err(Refused::Invalid(_))));
        assert_eq!(s.get("datestyle").as_deref(), Some("ISO, MDY"));
    }

    #[test]
    fn set_show_reset() {
        let s = Settings::default();
        assert_eq!(s.get("TimeZone").as_deref(), Some("UTC"));
        s.set("TimeZone", "Europe/Paris").unwrap();
        assert_eq!(s.get("timezone").as_deref(), Some("Europe/Paris"));
        assert_eq!(s.zone().name(), "Europe/Paris");
        s.set("myapp.user", "ann").unwrap();
        s.reset("timezone");
        s.reset("myapp.user");
        assert_eq!(s.get("timezone").as_deref(), Some("UTC"));
        assert!(s.zone().is_utc());
        s.set("TimeZone", "-3:30").unwrap();
        assert_eq!(s.get("timezone").as_deref(), Some("<-03:30>+03:30"));
        assert_eq!(s.zone().name(), "-03:30");
        let refused = s.set("TimeZone", "Nowhere/Land");
        assert!(matches!(refused, Err(Refused::Invalid(_))));
        assert_eq!(s.get("myapp.user"), None);
        assert_eq!(
            s.set("server_version", "16"),
            Err(Refused::ReadOnly("server_version".into()))
        );
    }
}

/// A boolean parameter's value as PostgreSQL reads one: `on`, `off`,
/// `true`, `false`, `yes`, `no`, `1`, `0`, or a prefix of one of the words
/// that no other starts with, in any case; `None` when it is not one.
/// `origin`, `replica` or `local`, in any case.
fn replication_role(value: &str) -> Result<String, Refused> {
    let role = value.to_lowercase();
    match role.as_str() {
        "origin" | "replica" | "local" => Ok(role),
        _ => Err(Refused::Invalid(format!(
            "invalid value for parameter \"session_replication_role\": \"{value}\""
        ))),
    }
}

pub fn boolean(value: &str) -> Option<bool> {
    let value = value.trim().trim_matches('\'').trim().to_lowercase();
    match value.as_str() {
        "1" | "on" => return Some(true),
        "0" | "of" | "off" => return Some(false),
        "" | "o" => return None,
        _ => {}
    }
    let words = [
        ("true", true),
        ("yes", true),
        ("false", false),
        ("no", false),
    ];
    words
        .iter()
        .find(|(word, _)| word.starts_with(value.as_str()))
        .map(|&(_, on)| on)
}

/// A duration parameter's value (`statement_timeout`): a number of
/// milliseconds, or a number with a unit (`ms`, `s`, `min`, `h`, `d`);
/// `None` when it is not one. Zero turns the limit off.
pub fn duration_ms(value: &str) -> Option<u64> {
    let value = value.trim().trim_matches('\'').trim();
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: u64 = number.parse().ok()?;
    let scale = match unit.trim().to_lowercase().as_str() {
        "" | "ms" => 1,
        "s" => 1000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(scale)
}

#[cfg(test)]
mod boolean_tests {
    use super::boolean;

    #[test]
    fn words_prefixes_and_numbers() {
        for on in ["on", "ON", "true", "t", "tru", "yes", "y", "1", " 'on' "] {
            assert_eq!(boolean(on), Some(true), "{on}");
        }
        for off in ["off", "of", "false", "F", "no", "n", "0"] {
            assert_eq!(boolean(off), Some(false), "{off}");
        }
        for neither in ["o", "", "2", "onn", "maybe", "yess"] {
            assert_eq!(boolean(neither), None, "{neither}");
        }
    }
}

#[cfg(test)]
mod duration_tests {
    use super::duration_ms;

    #[test]
    fn durations_read_like_postgresql() {
        assert_eq!(duration_ms("0"), Some(0));
        assert_eq!(duration_ms("250"), Some(250));
        assert_eq!(duration_ms("'50ms'"), Some(50));
        assert_eq!(duration_ms("5s"), Some(5000));
        assert_eq!(duration_ms("2 min"), Some(120_000));
        assert_eq!(duration_ms("1h"), Some(3_600_000));
        assert_eq!(duration_ms("soon"), None);
        assert_eq!(duration_ms("5 parsecs"), None);
        assert_eq!(duration_ms("-1"), None);
    }
}
