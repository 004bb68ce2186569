//! Entities in the service's JSON, and the OData text of keys and filters.
//!
//! Values go as the service types them: `Edm.Int64`, `Edm.DateTime`,
//! `Edm.Guid`, `Edm.Binary` and `Edm.Double` with an `@odata.type`
//! annotation; Int32, Boolean and String as plain JSON. tablegate's own
//! types (Decimal, Date, Json) go as strings, and the hidden property
//! `tgxtypes` lists which properties hold them (`name:Decimal;other:Date`),
//! so they read back as written. Other clients see ordinary strings.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chrono::{NaiveDate, SecondsFormat};
use serde_json::{Map, Value as Json};

use super::names;
use crate::model::{Date, DateTime, Decimal, ETag, Entity, EntityKey, Guid, Properties, Value};

/// The hidden property naming the properties of tablegate's own types.
pub const TYPES_PROPERTY: &str = "tgxtypes";

/// A value the service's JSON cannot carry back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("property {property:?}: {reason}")]
pub struct JsonError {
    pub property: String,
    pub reason: String,
}

/// The JSON body of a write of `entity` (with its keys).
pub fn entity_body(entity: &Entity) -> Json {
    let mut out = Map::new();
    out.insert(
        "PartitionKey".into(),
        entity.key.partition_key.clone().into(),
    );
    out.insert("RowKey".into(), entity.key.row_key.clone().into());
    let mut own_types = Vec::new();
    for (name, value) in &entity.properties {
        let name = names::property(name);
        let (json, annotation) = match value {
            Value::String(s) => (Json::from(s.as_str()), None),
            Value::Int32(v) => (Json::from(*v), None),
            Value::Boolean(v) => (Json::from(*v), None),
            Value::Int64(v) => (Json::from(v.to_string()), Some("Edm.Int64")),
            Value::Double(v) => (double(*v), Some("Edm.Double")),
            Value::DateTime(t) => (Json::from(datetime_text(*t)), Some("Edm.DateTime")),
            Value::Guid(g) => (Json::from(g.to_string()), Some("Edm.Guid")),
            Value::Binary(b) => (Json::from(STANDARD.encode(b)), Some("Edm.Binary")),
            Value::Decimal(d) => {
                own_types.push(format!("{name}:Decimal"));
                (Json::from(d.to_string()), None)
            }
            Value::Date(d) => {
                own_types.push(format!("{name}:Date"));
                (Json::from(date_text(*d)), None)
            }
            Value::Json(text) => {
                own_types.push(format!("{name}:Json"));
                (Json::from(text.as_str()), None)
            }
        };
        if let Some(edm) = annotation {
            out.insert(format!("{name}@odata.type"), edm.into());
        }
        out.insert(name, json);
    }
    if !own_types.is_empty() {
        out.insert(TYPES_PROPERTY.into(), own_types.join(";").into());
    }
    Json::Object(out)
}

fn double(v: f64) -> Json {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number)
    }
}

/// A DateTime as the service writes it (UTC, up to 7 fractional digits).
pub fn datetime_text(t: DateTime) -> String {
    match chrono::DateTime::from_timestamp_micros(t.0) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Micros, true),
        None => t.0.to_string(),
    }
}

fn date_text(d: Date) -> String {
    Value::Date(d).to_string()
}

fn parse_datetime(text: &str) -> Option<DateTime> {
    let t = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    Some(DateTime(t.timestamp_micros()))
}

/// An entity of a response (minimal metadata).
pub fn entity_of(json: Map<String, Json>) -> Result<Entity, JsonError> {
    let text = |json: &Map<String, Json>, name: &str| {
        json.get(name)
            .and_then(Json::as_str)
            .map(str::to_owned)
            .ok_or_else(|| JsonError {
                property: name.into(),
                reason: "missing from the service's answer".into(),
            })
    };
    let key = EntityKey::new(text(&json, "PartitionKey")?, text(&json, "RowKey")?);
    let etag = json
        .get("odata.etag")
        .and_then(Json::as_str)
        .map(|e| ETag(e.to_owned()));
    let timestamp = json
        .get("Timestamp")
        .and_then(Json::as_str)
        .and_then(parse_datetime);
    let own_types: BTreeMap<&str, &str> = json
        .get(TYPES_PROPERTY)
        .and_then(Json::as_str)
        .map(|list| {
            list.split(';')
                .filter_map(|pair| pair.split_once(':'))
                .collect()
        })
        .unwrap_or_default();
    let mut properties = Properties::new();
    for (name, value) in &json {
        if name.contains('@')
            || name.starts_with("odata.")
            || matches!(
                name.as_str(),
                "PartitionKey" | "RowKey" | "Timestamp" | TYPES_PROPERTY
            )
        {
            continue;
        }
        let annotation = json
            .get(&format!("{name}@odata.type"))
            .and_then(Json::as_str);
        let typed = own_types.get(name.as_str()).copied().or(annotation);
        let value = value_of(value, typed).map_err(|reason| JsonError {
            property: names::property_of(name),
            reason,
        })?;
        if let Some(value) = value {
            properties.insert(names::property_of(name), value);
        }
    }
    Ok(Entity {
        key,
        properties,
        timestamp,
        etag,
    })
}

/// A property's value from its JSON and its type, if named; None for null.
fn value_of(json: &Json, typed: Option<&str>) -> Result<Option<Value>, String> {
    let bad = || format!("{json} is not a valid {}", typed.unwrap_or("value"));
    let text = || json.as_str().ok_or_else(bad);
    Ok(Some(match (typed, json) {
        (_, Json::Null) => return Ok(None),
        (Some("Edm.Int64"), _) => Value::Int64(text()?.parse().map_err(|_| bad())?),
        (Some("Edm.Int32"), _) => Value::Int32(
            json.as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(bad)?,
        ),
        (Some("Edm.Double"), Json::String(s)) => Value::Double(match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" | "INF" => f64::INFINITY,
            "-Infinity" | "-INF" => f64::NEG_INFINITY,
            other => other.parse().map_err(|_| bad())?,
        }),
        (Some("Edm.Double"), _) => Value::Double(json.as_f64().ok_or_else(bad)?),
        (Some("Edm.DateTime"), _) => Value::DateTime(parse_datetime(text()?).ok_or_else(bad)?),
        (Some("Edm.Guid"), _) => Value::Guid(parse_guid(text()?).ok_or_else(bad)?),
        (Some("Edm.Binary"), _) => Value::Binary(STANDARD.decode(text()?).map_err(|_| bad())?),
        (Some("Edm.Boolean"), _) => Value::Boolean(json.as_bool().ok_or_else(bad)?),
        (Some("Decimal"), _) => Value::Decimal(parse_decimal(text()?).ok_or_else(bad)?),
        (Some("Date"), _) => Value::Date(parse_date(text()?).ok_or_else(bad)?),
        (Some("Json"), _) => Value::Json(text()?.to_owned()),
        (Some("Edm.String") | None, Json::String(s)) => Value::String(s.clone()),
        (None, Json::Bool(b)) => Value::Boolean(*b),
        (None, Json::Number(n)) => match n.as_i64().and_then(|v| i32::try_from(v).ok()) {
            Some(v) if !n.is_f64() => Value::Int32(v),
            _ => Value::Double(n.as_f64().ok_or_else(bad)?),
        },
        _ => return Err(bad()),
    }))
}

fn parse_guid(text: &str) -> Option<Guid> {
    let digits: String = text.chars().filter(|&c| c != '-').collect();
    if digits.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(digits.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(Guid(bytes))
}

fn parse_decimal(text: &str) -> Option<Decimal> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let scale = u8::try_from(frac.len()).ok()?;
    let digits = format!("{int}{frac}");
    Decimal::new(digits.parse().ok()?, scale)
}

fn parse_date(text: &str) -> Option<Date> {
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some(Date(i32::try_from((day - epoch).num_days()).ok()?))
}

/// A string literal of OData (single quotes doubled).
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The resource path of one entity: `t(PartitionKey='a',RowKey='b')`,
/// percent-encoded.
pub fn entity_path(table: &str, key: &EntityKey) -> String {
    format!(
        "{table}(PartitionKey={},RowKey={})",
        encode(&literal(&key.partition_key)),
        encode(&literal(&key.row_key))
    )
}

/// Percent-encodes everything but unreserved characters.
pub fn encode(text: &str) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    utf8_percent_encode(text, RESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_the_service_json() {
        let entity = Entity::new("p'1", "r 1")
            .with("s", Value::String("text".into()))
            .with("i", Value::Int32(-7))
            .with("l", Value::Int64(i64::MIN))
            .with("d", Value::Double(1.0))
            .with("nan", Value::Double(f64::NAN))
            .with("b", Value::Boolean(true))
            .with("t", Value::DateTime(DateTime(1_700_000_000_123_456)))
            .with("g", Value::Guid(Guid([7; 16])))
            .with("bin", Value::Binary(vec![0, 1, 255]))
            .with("dec", Value::Decimal(Decimal::new(-12345, 3).unwrap()))
            .with("day", Value::Date(Date(-1)))
            .with("doc", Value::Json("{\"a\": 1}".into()))
            .with("odd name", Value::Int32(1));
        let Json::Object(body) = entity_body(&entity) else {
            panic!("not an object")
        };
        // What the service sends back: the body, with its system fields.
        let mut answer = body.clone();
        answer.insert("odata.etag".into(), "W/\"datetime'x'\"".into());
        answer.insert("Timestamp".into(), "2026-11-22T01:02:03.4567890Z".into());
        let back = entity_of(answer).unwrap();
        assert_eq!(back.key, entity.key);
        assert_eq!(back.etag, Some(ETag("W/\"datetime'x'\"".into())));
        let nan = |e: &Entity| matches!(e.properties["nan"], Value::Double(v) if v.is_nan());
        assert!(nan(&back));
        let without_nan = |e: &Entity| {
            let mut p = e.properties.clone();
            p.remove("nan");
            p
        };
        assert_eq!(without_nan(&back), without_nan(&entity));
    }

    #[test]
    fn keys_in_paths() {
        let key = EntityKey::new("a'b", "x y/é");
        assert_eq!(
            entity_path("t", &key),
            "t(PartitionKey=%27a%27%27b%27,RowKey=%27x%20y%2F%C3%A9%27)"
        );
    }
}
