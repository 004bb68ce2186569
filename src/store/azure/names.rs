//! Store names as the Azure service accepts them.
//!
//! The service takes table names of 3 to 63 letters and digits starting
//! with a letter, compared without case, and property names that are C#
//! identifiers. tablegate's names are wider (SQL identifiers, `.` in the
//! names of index tables), so names the service would refuse, or could
//! confuse, are carried in a reversible form:
//!
//! - a table name the service takes is kept (so that a table other clients
//!   made can be declared under its own name); any other name becomes
//!   `tgx` + the lowercase hex of its UTF-8 bytes (up to 30 bytes), or,
//!   longer, `tgh` + 60 hex digits of its SHA-256 (not reversible). The
//!   service compares names without case, so `Orders` and `orders` are one
//!   table there;
//! - a property name that is an identifier is kept; any other name becomes
//!   `tgx_` + the hex of its bytes.
//!
//! A kept name never starts with `tgx` or `tgh`, so the forms cannot meet.

use std::fmt::Write;

const ENCODED: &str = "tgx";
const HASHED: &str = "tgh";
const MAX_TABLE: usize = 63;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn unhex(text: &str) -> Option<String> {
    if text.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn reserved(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with(ENCODED) || lower.starts_with(HASHED)
}

/// The service's name of a store table.
pub fn table(name: &str) -> String {
    let kept = (3..=MAX_TABLE).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && !name.eq_ignore_ascii_case("tables")
        && !reserved(name);
    if kept {
        return name.to_owned();
    }
    let encoded = format!("{ENCODED}{}", hex(name.as_bytes()));
    if encoded.len() <= MAX_TABLE {
        return encoded;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    format!(
        "{HASHED}{}",
        &hex(digest.as_ref())[..MAX_TABLE - HASHED.len()]
    )
}

/// The store name of a service table, when it can be told.
pub fn table_of(service_name: &str) -> Option<String> {
    match service_name.strip_prefix(ENCODED) {
        Some(encoded) => unhex(encoded),
        None if service_name.starts_with(HASHED) => None,
        None => Some(service_name.to_owned()),
    }
}

fn is_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The service's name of a property.
pub fn property(name: &str) -> String {
    if is_identifier(name) && !reserved(name) {
        name.to_owned()
    } else {
        format!("{ENCODED}_{}", hex(name.as_bytes()))
    }
}

/// The store name of a service property.
pub fn property_of(service_name: &str) -> String {
    service_name
        .strip_prefix("tgx_")
        .and_then(unhex)
        .unwrap_or_else(|| service_name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_the_service_form() {
        for name in [
            "orders",
            "_tablegate_catalog",
            "Orders",
            "t",
            "order_items.index.x",
            "tgxfake",
            "tables",
        ] {
            let service = table(name);
            assert!(service.len() <= 63 && service.len() >= 3, "{service}");
            assert!(
                service.chars().all(|c| c.is_ascii_alphanumeric()),
                "{service}"
            );
            assert_eq!(table_of(&service).as_deref(), Some(name));
        }
        assert_eq!(table("orders"), "orders");
        assert_eq!(table("Customers"), "Customers");
        let long = "x_".repeat(20);
        assert!(table(&long).starts_with("tgh"));
        assert_eq!(table(&long).len(), 63);
        assert_eq!(table_of(&table(&long)), None);

        for name in ["amount", "_sum", "order id", "é", "tgx_1", "1st"] {
            let service = property(name);
            assert!(is_identifier(&service), "{service}");
            assert_eq!(property_of(&service), name);
        }
        assert_eq!(property("amount"), "amount");
    }
}
