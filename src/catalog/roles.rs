//! Roles made with SQL (`CREATE ROLE` / `CREATE USER`), kept in the system
//! table's `roles` partition with their SCRAM-SHA-256 secret: a random salt
//! and the salted password (RFC 5802's `Hi`, PBKDF2-HMAC-SHA-256 over the
//! SASLprep-normalized password), never the password itself.
//!
//! Roles made here are not superusers: what they may do is what GRANT gave
//! them. The users a server is started with (`--user`, `--users`) are its
//! superusers.

use std::num::NonZeroU32;
use std::sync::Arc;

use super::named::Named;
use super::CatalogError;
use crate::model::{Entity, Value};
use crate::store::TableStore;

const ROLES_PARTITION: &str = "roles";
const SALT: &str = "salt";
const SALTED_PASSWORD: &str = "salted_password";
/// PostgreSQL's default `scram_iterations`.
pub const SCRAM_ITERATIONS: u32 = 4096;

/// A role and its SCRAM secret (`None`: it cannot log in with a password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleDef {
    pub name: String,
    pub secret: Option<ScramSecret>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramSecret {
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

impl ScramSecret {
    /// A fresh salt and the password salted with it.
    pub fn new(password: &str) -> ScramSecret {
        let mut salt = [0u8; 16];
        // The system's random source does not fail on supported platforms;
        // were it to, the salt would be zeros, still a valid (weaker) secret.
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt);
        ScramSecret {
            salted_password: salted_password(password, &salt),
            salt: salt.to_vec(),
        }
    }
}

/// RFC 5802's `Hi(Normalize(password), salt, i)`.
pub fn salted_password(password: &str, salt: &[u8]) -> Vec<u8> {
    let normalized = stringprep::saslprep(password)
        .map(|p| p.into_owned())
        .unwrap_or_else(|_| password.to_owned());
    let mut out = vec![0u8; 32];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        NonZeroU32::new(SCRAM_ITERATIONS).expect("nonzero"),
        salt,
        normalized.as_bytes(),
        &mut out,
    );
    out
}

fn entity(role: &RoleDef) -> Entity {
    let mut e = Entity::new(ROLES_PARTITION, role.name.as_str());
    if let Some(secret) = &role.secret {
        e = e.with(SALT, Value::Binary(secret.salt.clone())).with(
            SALTED_PASSWORD,
            Value::Binary(secret.salted_password.clone()),
        );
    }
    e
}

fn role_of(e: &Entity) -> RoleDef {
    let secret = match (e.get(SALT), e.get(SALTED_PASSWORD)) {
        (Some(Value::Binary(salt)), Some(Value::Binary(salted))) => Some(ScramSecret {
            salt: salt.clone(),
            salted_password: salted.clone(),
        }),
        _ => None,
    };
    RoleDef {
        name: e.key.row_key.clone(),
        secret,
    }
}

/// Every role made with SQL, by name.
pub struct Roles(Named<RoleDef>);

impl Roles {
    pub(super) async fn open(store: Arc<dyn TableStore>) -> Result<Self, CatalogError> {
        let read = |e: &Entity| Ok(role_of(e));
        Ok(Roles(Named::open(store, ROLES_PARTITION, read).await?))
    }

    pub fn get(&self, name: &str) -> Option<RoleDef> {
        self.0.get(name)
    }

    /// Every role, by name.
    pub fn list(&self) -> Vec<RoleDef> {
        self.0.list()
    }

    pub async fn create(&self, role: RoleDef) -> Result<(), CatalogError> {
        let exists = || CatalogError::RoleExists(role.name.clone());
        (self.0)
            .create(&role.name, entity(&role), role.clone(), exists)
            .await
    }

    /// Replaces a role's secret (ALTER ROLE ... PASSWORD).
    pub async fn alter(&self, role: RoleDef) -> Result<(), CatalogError> {
        if self.get(&role.name).is_none() {
            return Err(CatalogError::RoleNotFound(role.name));
        }
        (self.0)
            .replace(&role.name, &role.name, entity(&role), role.clone())
            .await
    }

    pub async fn drop(&self, name: &str) -> Result<(), CatalogError> {
        if self.get(name).is_none() {
            return Err(CatalogError::RoleNotFound(name.to_owned()));
        }
        self.0.drop(name).await
    }
}
