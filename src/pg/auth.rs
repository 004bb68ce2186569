//! Who may connect, and over what: trust (any user, no password; only on a
//! loopback address), or SCRAM-SHA-256 against a list of users; and TLS
//! with a given certificate.
//!
//! A user list is a text file of `name:password` lines (blank lines and
//! lines starting with `#` are skipped). Passwords are kept only as SCRAM
//! salted hashes, made when the list is loaded. Those users are the
//! server's superusers; roles made with `CREATE ROLE ... PASSWORD` log in
//! too, with the secret the catalog keeps for them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::auth::sasl::scram::{gen_salted_password, random_nonce, SCRAM_ITERATIONS};
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, ServerParameterProvider,
};
use pgwire::api::ClientInfo;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::tokio::TlsAcceptor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::sql::{Settings, REPORTED};

/// How connections authenticate.
#[derive(Clone)]
pub enum Authentication {
    /// Any user, no password.
    Trust,
    /// SCRAM-SHA-256 against these users.
    Scram(Arc<Users>),
}

/// Users and their SCRAM salted passwords.
#[derive(Debug, Default)]
pub struct Users(HashMap<String, Password>);

impl Users {
    pub fn add(&mut self, name: &str, password: &str) {
        let salt = random_nonce().into_bytes();
        let salted = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
        self.0
            .insert(name.to_owned(), Password::new(Some(salt), salted));
    }

    /// Users from `name:password` lines.
    pub fn parse(text: &str) -> Result<Users, String> {
        let mut users = Users::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, password) = line
                .split_once(':')
                .filter(|(name, password)| !name.is_empty() && !password.is_empty())
                .ok_or_else(|| format!("line {}: expected name:password", n + 1))?;
            users.add(name.trim(), password);
        }
        Ok(users)
    }

    pub fn load(path: &Path) -> Result<Users, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the user list {}: {e}", path.display()))?;
        Users::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[async_trait]
impl AuthSource for Users {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        // An unknown user fails the same way as a wrong password, as in
        // PostgreSQL, so that names cannot be probed.
        self.0
            .get(user)
            .cloned()
            .ok_or_else(|| PgWireError::InvalidPassword(user.to_owned()))
    }
}

/// The users of the list, then the roles of the catalog.
pub struct Logins {
    pub users: Arc<Users>,
    pub catalog: Arc<crate::catalog::Catalog>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logins")
            .field("users", &self.users)
            .finish()
    }
}

#[async_trait]
impl AuthSource for Logins {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        if let Some(password) = self.users.0.get(user) {
            return Ok(password.clone());
        }
        match self.catalog.roles.get(user).and_then(|r| r.secret) {
            Some(secret) => Ok(Password::new(Some(secret.salt), secret.salted_password)),
            None => Err(PgWireError::InvalidPassword(user.to_owned())),
        }
    }
}

/// The parameters a connection is told at startup: the server's, and the
/// session's starting values of those a client may give in its startup
/// packet (`TimeZone` from libpq's `PGTZ` or pgJDBC's, `DateStyle`,
/// `application_name`), as the session takes them.
pub struct StartupParameters;

impl ServerParameterProvider for StartupParameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        let user = client.metadata().get("user").map_or("", String::as_str);
        let settings = Settings::for_user(user);
        for (name, refused) in settings.start_with(client.metadata()) {
            tracing::warn!("startup parameter {name} not taken: {refused:?}");
        }
        let mut parameters = DefaultServerParameterProvider::default().server_parameters(client)?;
        for name in REPORTED {
            if let Some(value) = settings.get(name) {
                parameters.insert((*name).to_owned(), value);
            }
        }
        Some(parameters)
    }
}

/// A TLS acceptor for a PEM certificate chain and private key.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key {}: {e}", key.display()))?;
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
    .map_err(|e| format!("invalid certificate or key: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_lists() {
        let users = Users::parse("# team\nalice:s3cret:with:colons\n\nbob: pw \n").unwrap();
        assert_eq!(users.0.len(), 2);
        assert!(users.0["alice"].salt().is_some());
        assert_eq!(
            users.0["alice"].password(),
            gen_salted_password(
                "s3cret:with:colons",
                users.0["alice"].salt().unwrap(),
                SCRAM_ITERATIONS
            )
        );
        assert!(Users::parse("nopassword\n").unwrap_err().contains("line 1"));
        // Roles made with SQL get the secret pgwire checks logins against.
        for password in ["hunter2", "pässwörd", "\u{2168}"] {
            let salt = b"0123456789abcdef";
            assert_eq!(
                crate::catalog::salted_password(password, salt),
                gen_salted_password(password, salt, SCRAM_ITERATIONS)
            );
        }
        assert!(Users::parse(":pw\n").is_err());
    }
}
