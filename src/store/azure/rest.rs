//! Requests to the service: signing, retries, and its errors.
//!
//! Throttling and busy answers (HTTP 503, and 500 with the service's
//! `OperationTimedOut` or `InternalError`) and lost connections are retried
//! with exponential backoff and jitter, up to [`MAX_ATTEMPTS`] times, as
//! the seeds' performance checklist advises; other errors never are.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value as Json;

use super::account::Account;

/// Tries of one request, the first included.
pub const MAX_ATTEMPTS: u32 = 6;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// The REST API version the requests speak.
const VERSION: &str = "2019-02-02";

/// An answer of the service that is not a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError {
    pub status: u16,
    /// The service's error code (`EntityAlreadyExists`, ...), or empty.
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {} {}: {}", self.status, self.code, self.message)
    }
}

impl ServiceError {
    /// The error of a failed answer, from its JSON body
    /// (`{"odata.error": {"code": ..., "message": {"value": ...}}}`).
    pub fn of(status: StatusCode, body: &[u8]) -> ServiceError {
        let json: Json = serde_json::from_slice(body).unwrap_or(Json::Null);
        let error = &json["odata.error"];
        let message = error["message"]["value"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
        ServiceError {
            status: status.as_u16(),
            code: error["code"].as_str().unwrap_or_default().to_owned(),
            message: message.lines().next().unwrap_or_default().to_owned(),
        }
    }

    fn retryable(&self) -> bool {
        self.status == 503
            || (self.status == 500
                && matches!(
                    self.code.as_str(),
                    "OperationTimedOut" | "InternalError" | ""
                ))
            || self.status == 0
    }
}

/// A successful answer.
pub struct Answer {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> Result<Json, ServiceError> {
        serde_json::from_slice(&self.body).map_err(|e| ServiceError {
            status: 200,
            code: "InvalidAnswer".into(),
            message: format!("the service's answer is not JSON: {e}"),
        })
    }
}

/// One request, before it is sent.
pub struct Request<'a> {
    pub method: Method,
    /// The resource path (`Tables`, `t()`, `$batch`), already encoded.
    pub resource: &'a str,
    /// The encoded query string, without `?`.
    pub query: &'a str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Bytes>,
}

impl<'a> Request<'a> {
    pub fn new(method: Method, resource: &'a str) -> Self {
        Request {
            method,
            resource,
            query: "",
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn query(mut self, query: &'a str) -> Self {
        self.query = query;
        self
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn body(mut self, body: Bytes) -> Self {
        self.body = Some(body);
        self
    }

    pub fn json(mut self, body: &Json) -> Self {
        self.headers
            .push(("Content-Type", "application/json".into()));
        self.body = Some(Bytes::from(body.to_string()));
        self
    }
}

/// The service's HTTP client for one account.
pub struct Rest {
    http: reqwest::Client,
    pub account: Account,
}

impl Rest {
    pub fn new(account: Account) -> Result<Rest, String> {
        // One TLS crypto provider for the process: ring, as the server's.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot make the HTTP client: {e}"))?;
        Ok(Rest { http, account })
    }

    /// Sends a request, retrying what may be retried; a success (2xx) or
    /// the service's error.
    pub async fn send(&self, request: Request<'_>) -> Result<Answer, ServiceError> {
        let url = self.account.url(request.resource, request.query);
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let error = match self.try_once(&request, &url).await {
                Ok(answer) => return Ok(answer),
                Err(e) => e,
            };
            if !error.retryable() || attempt >= MAX_ATTEMPTS {
                return Err(error);
            }
            tracing::debug!("retrying after {error} (attempt {attempt})");
            let jitter = Duration::from_millis(u64::from(super::random_u32() % 50));
            tokio::time::sleep(backoff + jitter).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            attempt += 1;
        }
    }

    async fn try_once(&self, request: &Request<'_>, url: &str) -> Result<Answer, ServiceError> {
        let date = chrono::Utc::now()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        put("x-ms-date", &date);
        put("x-ms-version", VERSION);
        put("DataServiceVersion", "3.0;NetFx");
        put("MaxDataServiceVersion", "3.0;NetFx");
        put("Accept", "application/json;odata=minimalmetadata");
        if let Some(authorization) = self.account.authorization(request.resource, &date) {
            put("Authorization", &authorization);
        }
        for (name, value) in &request.headers {
            put(name, value);
        }
        let mut builder = self
            .http
            .request(request.method.clone(), url)
            .headers(headers);
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let lost = |e: reqwest::Error| ServiceError {
            status: 0,
            code: "ConnectionFailed".into(),
            message: format!("cannot reach the service at {}: {e}", self.account.endpoint),
        };
        let response = builder.send().await.map_err(lost)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(lost)?;
        if status.is_success() {
            Ok(Answer { headers, body })
        } else {
            Err(ServiceError::of(status, &body))
        }
    }
}
