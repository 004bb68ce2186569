//! Entity group transactions: up to 100 operations on one partition of one
//! table, sent as one `$batch` request (a multipart/mixed body holding one
//! changeset), applied all or none by the service.

use bytes::Bytes;
use reqwest::Method;

use super::json;
use super::names;
use super::rest::{Request, Rest, ServiceError};
use super::{if_match_header, outcome, store_error};
use crate::model::EntityKey;
use crate::store::{Result, StoreError, WriteOp, WriteOutcome};

/// Sends `ops` (already checked: one partition, distinct entities) as one
/// transaction; the outcome of each, in order.
pub async fn send(rest: &Rest, table: &str, ops: &[WriteOp]) -> Result<Vec<WriteOutcome>> {
    let id = format!("{:08x}{:08x}", super::random_u32(), super::random_u32());
    let (batch, changeset) = (format!("batch_{id}"), format!("changeset_{id}"));
    let body = body(rest, table, ops, &batch, &changeset);
    let answer = rest
        .send(
            Request::new(Method::POST, "$batch")
                .header("Content-Type", format!("multipart/mixed; boundary={batch}"))
                .body(Bytes::from(body)),
        )
        .await
        .map_err(|e| store_error(e, table, None))?;
    let parts = responses(&answer.body);
    if let Some(failed) = parts.iter().find(|p| p.status >= 300) {
        let error = ServiceError::of(
            reqwest::StatusCode::from_u16(failed.status)
                .unwrap_or(reqwest::StatusCode::BAD_REQUEST),
            failed.body.as_bytes(),
        );
        // The message names the failing operation: `2:The specified entity ...`.
        let index = error
            .message
            .split_once(':')
            .and_then(|(n, _)| n.trim().parse::<usize>().ok())
            .filter(|&n| n < ops.len())
            .unwrap_or(0);
        let key: &EntityKey = ops[index].key();
        return Err(StoreError::BatchOperationFailed {
            index,
            source: Box::new(store_error(error, table, Some(key))),
        });
    }
    if parts.len() != ops.len() {
        return Err(StoreError::Service(format!(
            "the batch of {} operations got {} answers",
            ops.len(),
            parts.len()
        )));
    }
    Ok(ops
        .iter()
        .zip(&parts)
        .map(|(op, part)| match op {
            WriteOp::Delete { .. } => WriteOutcome {
                etag: None,
                timestamp: None,
            },
            _ => outcome(part.etag.as_deref()),
        })
        .collect())
}

/// The multipart body: one changeset with a request per operation.
fn body(rest: &Rest, table: &str, ops: &[WriteOp], batch: &str, changeset: &str) -> String {
    let service_table = names::table(table);
    let mut out = String::new();
    let mut line = |text: &str| {
        out.push_str(text);
        out.push_str("\r\n");
    };
    line(&format!("--{batch}"));
    line(&format!(
        "Content-Type: multipart/mixed; boundary={changeset}"
    ));
    line("");
    for (index, op) in ops.iter().enumerate() {
        let key = op.key();
        let entity_url = rest
            .account
            .url(&json::entity_path(&service_table, key), "");
        let (method, url, if_match, entity) = match op {
            WriteOp::Insert(e) => ("POST", rest.account.url(&service_table, ""), None, Some(e)),
            WriteOp::Replace { entity, if_match } => {
                ("PUT", entity_url, Some(if_match), Some(entity))
            }
            WriteOp::Merge { entity, if_match } => {
                ("PATCH", entity_url, Some(if_match), Some(entity))
            }
            WriteOp::InsertOrReplace(e) => ("PUT", entity_url, None, Some(e)),
            WriteOp::InsertOrMerge(e) => ("PATCH", entity_url, None, Some(e)),
            WriteOp::Delete { if_match, .. } => ("DELETE", entity_url, Some(if_match), None),
        };
        line(&format!("--{changeset}"));
        line("Content-Type: application/http");
        line("Content-Transfer-Encoding: binary");
        line(&format!("Content-ID: {index}"));
        line("");
        line(&format!("{method} {url} HTTP/1.1"));
        line("Accept: application/json;odata=minimalmetadata");
        line("DataServiceVersion: 3.0;");
        if let Some(if_match) = if_match {
            line(&format!("If-Match: {}", if_match_header(if_match)));
        }
        match entity {
            Some(entity) => {
                let json = json::entity_body(entity).to_string();
                line("Content-Type: application/json");
                line("Prefer: return-no-content");
                line(&format!("Content-Length: {}", json.len()));
                line("");
                line(&json);
            }
            None => line(""),
        }
    }
    line(&format!("--{changeset}--"));
    line(&format!("--{batch}--"));
    out
}

/// One operation's answer inside the batch's answer.
#[derive(Debug, PartialEq)]
struct Part {
    status: u16,
    etag: Option<String>,
    body: String,
}

/// The HTTP answers inside a multipart batch answer, in order.
fn responses(body: &[u8]) -> Vec<Part> {
    let text = String::from_utf8_lossy(body);
    let mut parts = Vec::new();
    let mut lines = text
        .split("\r\n")
        .map(|l| l.trim_end_matches('\n'))
        .peekable();
    while let Some(line) = lines.next() {
        let Some(status) = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|code| code.parse::<u16>().ok())
        else {
            continue;
        };
        let mut etag = None;
        for header in lines.by_ref() {
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("etag") {
                    etag = Some(value.trim().to_owned());
                }
            }
        }
        let mut content = String::new();
        while let Some(next) = lines.peek() {
            if next.starts_with("--") {
                break;
            }
            content.push_str(next);
            lines.next();
        }
        parts.push(Part {
            status,
            etag,
            body: content,
        });
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_in_order() {
        let answer = "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n\
--changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
HTTP/1.1 204 No Content\r\nContent-ID: 1\r\nETag: W/\"datetime'2026-11-22T04%3A30%3A00.1234567Z'\"\r\n\r\n\r\n\
--changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n\
{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\"}}}\r\n\
--changesetresponse_2--\r\n--batchresponse_1--\r\n";
        let parts = responses(answer.as_bytes());
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].status, 204);
        assert!(parts[0].etag.as_deref().unwrap().starts_with("W/"));
        assert_eq!(parts[1].status, 409);
        assert!(parts[1].body.contains("EntityAlreadyExists"));
    }
}
