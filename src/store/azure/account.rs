//! An Azure Storage account: where its table endpoint is, and how requests
//! to it are signed.
//!
//! Accounts come from standard connection strings:
//! `DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k;EndpointSuffix=core.windows.net`,
//! `TableEndpoint=https://a.table.cosmos.azure.com:443/;AccountName=a;AccountKey=k`
//! (Cosmos DB Table API), a `SharedAccessSignature=...` instead of a key,
//! and the emulator's `UseDevelopmentStorage=true`.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::hmac;

/// The emulator's well-known account (the same in every emulator).
pub const DEVELOPMENT_ACCOUNT: &str = "devstoreaccount1";
pub const DEVELOPMENT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const DEVELOPMENT_TABLE_ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

/// How requests prove who they are.
#[derive(Clone)]
enum Credential {
    /// Shared Key Lite, with the account's key.
    Key(hmac::Key),
    /// A shared access signature, appended to every request's query.
    Sas(String),
}

/// An account's table endpoint and credential.
#[derive(Clone)]
pub struct Account {
    pub name: String,
    /// The endpoint's URL without a trailing slash; with the account name
    /// as its first path segment for the emulator.
    pub endpoint: String,
    credential: Credential,
    /// The path prefix the signature's resource starts with (the account
    /// name repeated for path-style emulator URLs).
    signed_prefix: String,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Account {
    /// The account of a connection string.
    pub fn from_connection_string(text: &str) -> Result<Account, String> {
        let mut fields: HashMap<String, String> = HashMap::new();
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("connection string part {part:?} is not Name=value"))?;
            fields.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
        let field = |name: &str| fields.get(name).map(String::as_str);

        if field("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            let endpoint = match field("developmentstorageproxyuri") {
                Some(proxy) => format!("{}/{DEVELOPMENT_ACCOUNT}", proxy.trim_end_matches('/')),
                None => DEVELOPMENT_TABLE_ENDPOINT.to_owned(),
            };
            return Account::with_key(DEVELOPMENT_ACCOUNT, endpoint, DEVELOPMENT_KEY);
        }
        let name = field("accountname");
        let endpoint = match (field("tableendpoint"), name) {
            (Some(endpoint), _) => endpoint.trim_end_matches('/').to_owned(),
            (None, Some(name)) => {
                let protocol = field("defaultendpointsprotocol").unwrap_or("https");
                let suffix = field("endpointsuffix").unwrap_or("core.windows.net");
                format!("{protocol}://{name}.table.{suffix}")
            }
            (None, None) => {
                return Err(
                    "the connection string names neither AccountName nor TableEndpoint".into(),
                )
            }
        };
        match (field("accountkey"), field("sharedaccesssignature")) {
            (Some(key), _) => {
                let name = name.ok_or("a connection string with AccountKey needs AccountName")?;
                Account::with_key(name, endpoint, key)
            }
            (None, Some(sas)) => Ok(Account {
                name: name.unwrap_or_default().to_owned(),
                endpoint,
                credential: Credential::Sas(sas.trim_start_matches('?').to_owned()),
                signed_prefix: String::new(),
            }),
            (None, None) => {
                Err("the connection string has neither AccountKey nor SharedAccessSignature".into())
            }
        }
    }

    fn with_key(name: &str, endpoint: String, key: &str) -> Result<Account, String> {
        let key = STANDARD
            .decode(key)
            .map_err(|_| "AccountKey is not base64".to_owned())?;
        // Path-style URLs (emulators, proxies) carry the account name as
        // the first path segment, which the signed resource repeats.
        let path = endpoint
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(_, path)| path.trim_end_matches('/'))
            .unwrap_or("");
        let signed_prefix = if path.is_empty() {
            format!("/{name}")
        } else {
            format!("/{name}/{path}")
        };
        Ok(Account {
            name: name.to_owned(),
            endpoint,
            credential: Credential::Key(hmac::Key::new(hmac::HMAC_SHA256, &key)),
            signed_prefix,
        })
    }

    /// Whether the endpoint is the Cosmos DB Table API's, which does not
    /// return query results in key order.
    pub fn is_cosmos(&self) -> bool {
        let host = self
            .endpoint
            .split_once("://")
            .map_or(self.endpoint.as_str(), |(_, rest)| rest);
        let host = host.split(['/', ':']).next().unwrap_or(host);
        host.ends_with(".cosmos.azure.com")
            || host.ends_with(".cosmosdb.azure.com")
            || host.ends_with(".documents.azure.com")
    }

    /// The URL of a resource path (`Tables`, `t(PartitionKey='a',RowKey='b')`,
    /// `$batch`) with an encoded query string (without `?`), the shared
    /// access signature added.
    pub fn url(&self, resource: &str, query: &str) -> String {
        let mut url = format!("{}/{resource}", self.endpoint);
        let sas = match &self.credential {
            Credential::Sas(sas) => sas.as_str(),
            Credential::Key(_) => "",
        };
        for (i, part) in [query, sas]
            .into_iter()
            .filter(|p| !p.is_empty())
            .enumerate()
        {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(part);
        }
        url
    }

    /// The `Authorization` header of a request to `resource` made at
    /// `date` (the `x-ms-date` header), by Shared Key Lite:
    /// `StringToSign = date + "\n" + CanonicalizedResource`. None with a
    /// shared access signature.
    pub fn authorization(&self, resource: &str, date: &str) -> Option<String> {
        let Credential::Key(key) = &self.credential else {
            return None;
        };
        // Only `comp` of the query is signed, and Table requests have none.
        let resource = resource.split('?').next().unwrap_or(resource);
        let to_sign = format!("{date}\n{}/{resource}", self.signed_prefix);
        let signature = STANDARD.encode(hmac::sign(key, to_sign.as_bytes()).as_ref());
        Some(format!("SharedKeyLite {}:{signature}", self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings() {
        let dev = Account::from_connection_string("UseDevelopmentStorage=true").unwrap();
        assert_eq!(dev.name, "devstoreaccount1");
        assert_eq!(dev.endpoint, "http://127.0.0.1:10002/devstoreaccount1");
        assert_eq!(dev.signed_prefix, "/devstoreaccount1/devstoreaccount1");

        let azure = Account::from_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        )
        .unwrap();
        assert_eq!(azure.endpoint, "https://acct.table.core.windows.net");
        assert_eq!(azure.signed_prefix, "/acct");

        let cosmos = Account::from_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;TableEndpoint=https://acct.table.cosmos.azure.com:443/;",
        )
        .unwrap();
        assert_eq!(cosmos.endpoint, "https://acct.table.cosmos.azure.com:443");
        assert!(cosmos.is_cosmos() && !azure.is_cosmos() && !dev.is_cosmos());

        let sas = Account::from_connection_string(
            "TableEndpoint=https://acct.table.core.windows.net/;SharedAccessSignature=sv=2019-02-02&sig=abc",
        )
        .unwrap();
        assert_eq!(
            sas.url("t()", "$top=1"),
            "https://acct.table.core.windows.net/t()?$top=1&sv=2019-02-02&sig=abc"
        );
        assert!(sas.authorization("t()", "now").is_none());

        // Shared Key Lite signs the date and the resource, the account
        // name doubled for the emulator's path-style URL.
        assert_eq!(
            dev.authorization("Tables", "Tue, 21 Sep 2021 00:50:52 GMT")
                .unwrap(),
            "SharedKeyLite devstoreaccount1:pAX2npYiFi1Ctn5nQgnlnfgqeumvu1LtXZVqqW5oCjM="
        );

        assert!(Account::from_connection_string("AccountName=a").is_err());
        assert!(Account::from_connection_string("AccountName=a;AccountKey=@@").is_err());
        assert!(Account::from_connection_string("nonsense").is_err());
    }
}
