//! Roles and privileges.
//!
//! - `CREATE ROLE` / `CREATE USER name [WITH] [LOGIN] PASSWORD '...'`,
//!   `ALTER ROLE name [WITH] PASSWORD '...'`, `DROP ROLE` / `DROP USER`;
//! - `GRANT` / `REVOKE` `SELECT`, `INSERT`, `UPDATE`, `DELETE` or `ALL` on
//!   tables to roles; a grant may end with `PARTITIONS 'from' TO 'to'`,
//!   which limits it to that range of the partition key (see
//!   [`PartitionLimit`]).
//!
//! A session of a role made with SQL passes a check before each statement
//! reads or writes anything: queries need SELECT on every table they read;
//! INSERT, UPDATE, DELETE and COPY FROM need their privilege on the target
//! (and SELECT on the other tables they read); definitions, roles, grants
//! and maintenance commands need a superuser. A denied statement fails with
//! SQLSTATE 42501. The server's own users (`--user`, `--users`, and anyone
//! on a trusted loopback connection who is not a role made with SQL) are
//! superusers.

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{lit, Expr, LogicalPlan};
use datafusion::sql::sqlparser::ast::{
    Action, AlterRoleOperation, CreateRole, GrantObjects, GranteeName, ObjectName, Password,
    Privileges, RoleOption, Statement,
};

use super::ddl;
use super::error::{Result, SqlError};
use super::session::{normalize, table_name, Output, Session};
use crate::catalog::{
    encode_component, CatalogError, Grant, Privilege, RoleDef, ScramSecret, TableDef,
};

fn denied(message: String) -> SqlError {
    SqlError::value("42501", message)
}

impl Session {
    /// Fails unless the session may do `privilege` on `table`.
    pub(super) fn require(&self, table: &TableDef, privilege: Privilege) -> Result<()> {
        match self.role() {
            Some(role) if !table.granted(role, privilege) => Err(denied(format!(
                "permission denied for table {}: role {role:?} has no {} privilege on it",
                table.name,
                privilege.keyword()
            ))),
            _ => Ok(()),
        }
    }

    /// Fails unless the session is a superuser's.
    pub(super) fn require_superuser(&self, action: &str) -> Result<()> {
        match self.role() {
            Some(role) => Err(denied(format!(
                "permission denied to {action}: role {role:?} is not a superuser"
            ))),
            None => Ok(()),
        }
    }

    /// Fails unless the session may read every table the plan reads, but
    /// `target` (the table a DML statement writes, checked on its own).
    pub(super) fn require_reads(&self, plan: &LogicalPlan, target: Option<&str>) -> Result<()> {
        if self.role().is_none() {
            return Ok(());
        }
        let mut read = Vec::new();
        plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let in_public = scan
                    .table_name
                    .schema()
                    .is_none_or(|s| s == super::session::SCHEMA_NAME);
                if in_public {
                    read.push(scan.table_name.table().to_owned());
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        for name in read {
            let name = name
                .strip_prefix(super::provider::DML_PREFIX)
                .unwrap_or(&name);
            if Some(name) == target {
                continue;
            }
            if let Some(def) = self.table_def(name) {
                self.require(&def, Privilege::Select)?;
            }
        }
        Ok(())
    }
}

fn secret(password: &Password) -> Result<Option<ScramSecret>> {
    match password {
        Password::NullPassword => Ok(None),
        Password::Password(expr) => {
            let text = expr.to_string();
            let text = text
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .ok_or_else(|| SqlError::Syntax(format!("a password is a string: {text}")))?
                .replace("''", "'");
            Ok(Some(ScramSecret::new(&text)))
        }
    }
}

pub async fn create_role(session: &mut Session, create: CreateRole) -> Result<Output> {
    session.require_superuser("create roles")?;
    if create.superuser == Some(true) {
        return Err(SqlError::FeatureNotSupported(
            "SUPERUSER roles: the server's superusers are its --user / --users list".into(),
        ));
    }
    let secret = match &create.password {
        Some(p) => secret(p)?,
        None => None,
    };
    for name in &create.names {
        let name = table_name(name)?;
        if session.engine().catalog.roles.get(&name).is_some() && create.if_not_exists {
            continue;
        }
        session
            .engine()
            .catalog
            .roles
            .create(RoleDef {
                name,
                secret: secret.clone(),
            })
            .await?;
    }
    Ok(Output::Command("CREATE ROLE".into()))
}

pub async fn alter_role(
    session: &mut Session,
    name: &datafusion::sql::sqlparser::ast::Ident,
    operation: &AlterRoleOperation,
) -> Result<Output> {
    session.require_superuser("alter roles")?;
    let AlterRoleOperation::WithOptions { options } = operation else {
        return Err(SqlError::FeatureNotSupported(format!(
            "ALTER ROLE {operation} (only PASSWORD is supported)"
        )));
    };
    let name = normalize(name);
    let roles = &session.engine().catalog.roles;
    let mut role = roles
        .get(&name)
        .ok_or_else(|| CatalogError::RoleNotFound(name.clone()))?;
    for option in options {
        match option {
            RoleOption::Password(p) => role.secret = secret(p)?,
            RoleOption::Login(_) => {}
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "ALTER ROLE ... {other} (only PASSWORD and LOGIN are supported)"
                )))
            }
        }
    }
    roles.alter(role).await?;
    Ok(Output::Command("ALTER ROLE".into()))
}

pub async fn drop_roles(
    session: &mut Session,
    names: &[ObjectName],
    if_exists: bool,
) -> Result<Output> {
    session.require_superuser("drop roles")?;
    for name in names {
        let name = table_name(name)?;
        let roles = &session.engine().catalog.roles;
        if roles.get(&name).is_none() {
            if if_exists {
                continue;
            }
            return Err(CatalogError::RoleNotFound(name).into());
        }
        // The role's grants go with it.
        for def in session.tables() {
            if def.grants.iter().any(|g| g.role == name) {
                let mut def = (*def).clone();
                def.grants.retain(|g| g.role != name);
                let table = def.name.clone();
                ddl::define(session, &table, Some(def))?;
            }
        }
        session.engine().catalog.roles.drop(&name).await?;
    }
    Ok(Output::Command("DROP ROLE".into()))
}

fn privileges(privileges: &Privileges) -> Result<Vec<Privilege>> {
    match privileges {
        Privileges::All { .. } => Ok(Privilege::ALL.to_vec()),
        Privileges::Actions(actions) => actions
            .iter()
            .map(|a| match a {
                Action::Select { columns: None } => Ok(Privilege::Select),
                Action::Insert { columns: None } => Ok(Privilege::Insert),
                Action::Update { columns: None } => Ok(Privilege::Update),
                Action::Delete => Ok(Privilege::Delete),
                other => Err(SqlError::FeatureNotSupported(format!(
                    "privilege {other} (SELECT, INSERT, UPDATE, DELETE and ALL on whole tables \
                     are supported)"
                ))),
            })
            .collect(),
    }
}

/// `GRANT` (`grant` true) or `REVOKE` of privileges on tables to roles.
pub fn grant_or_revoke(
    session: &mut Session,
    grant: bool,
    privileges_given: &Privileges,
    objects: Option<&GrantObjects>,
    grantees: &[datafusion::sql::sqlparser::ast::Grantee],
    partitions: Option<(String, String)>,
) -> Result<Output> {
    let verb = if grant { "GRANT" } else { "REVOKE" };
    session.require_superuser(&format!("{} privileges", verb.to_lowercase()))?;
    let privileges = privileges(privileges_given)?;
    let Some(GrantObjects::Tables(tables)) = objects else {
        return Err(SqlError::FeatureNotSupported(format!(
            "{verb} on anything but tables"
        )));
    };
    let mut roles = Vec::new();
    for grantee in grantees {
        let Some(GranteeName::ObjectName(name)) = &grantee.name else {
            return Err(SqlError::FeatureNotSupported(format!(
                "{verb} to {grantee}"
            )));
        };
        let name = table_name(name)?;
        if session.engine().catalog.roles.get(&name).is_none() {
            return Err(CatalogError::RoleNotFound(name).into());
        }
        roles.push(name);
    }
    for table in tables {
        let mut def = (*session.table(&table_name(table)?)?).clone();
        if let Some((from, to)) = &partitions {
            PartitionLimit::check(&def, from, to)?;
        }
        for role in &roles {
            match def.grants.iter_mut().find(|g| &g.role == role) {
                Some(g) => {
                    g.privileges.retain(|p| !privileges.contains(p));
                    if grant {
                        g.privileges.extend(&privileges);
                        g.privileges.sort();
                    }
                }
                None if grant => def.grants.push(Grant {
                    role: role.clone(),
                    privileges: privileges.clone(),
                    partitions: None,
                }),
                None => {}
            }
            if let (true, Some(range)) = (grant, &partitions) {
                if let Some(g) = def.grants.iter_mut().find(|g| &g.role == role) {
                    g.partitions = Some(range.clone());
                }
            }
            def.grants.retain(|g| !g.privileges.is_empty());
        }
        let name = def.name.clone();
        ddl::define(session, &name, Some(def))?;
    }
    Ok(Output::Command(verb.into()))
}

/// A grant limited to a range of partitions (`GRANT ... PARTITIONS 'a' TO
/// 'm'`, the seeds' shared access signature scoped to a key range): the
/// role sees only the rows of those partitions, and may write only there.
pub struct PartitionLimit {
    column: String,
    from: ScalarValue,
    to: ScalarValue,
    /// The same bounds as PartitionKeys (whose order is the values').
    from_key: String,
    to_key: String,
}

/// A partition key value given as text, as the column's value and key.
fn bound(def: &TableDef, text: &str) -> Result<(ScalarValue, String)> {
    let (partition, _) = def.key_columns();
    let [column] = partition else {
        return Err(SqlError::FeatureNotSupported(format!(
            "partition ranges in grants need a table whose partition key is one column; \
             \"{}\" has {}",
            def.name,
            partition.len()
        )));
    };
    let column = &def.columns[*column];
    let invalid = || {
        SqlError::value(
            "22P02",
            format!(
                "{text:?} is not a value of the partition key column \"{}\"",
                column.name
            ),
        )
    };
    let scalar = ScalarValue::Utf8(Some(text.to_owned()))
        .cast_to(&super::types::arrow_type(column.ty))
        .map_err(|_| invalid())?;
    let value = super::pushdown::literal_value(column.ty, &scalar).ok_or_else(invalid)?;
    let key = encode_component(&column.name, column.ty, &value)
        .map_err(|e| SqlError::value("22P02", e.to_string()))?;
    Ok((scalar, key))
}

impl PartitionLimit {
    /// The limit of `role`'s grant on the table, if it has one.
    pub fn of(def: &TableDef, role: &str) -> Option<PartitionLimit> {
        let (from, to) = def
            .grants
            .iter()
            .find(|g| g.role == role)?
            .partitions
            .as_ref()?;
        let (partition, _) = def.key_columns();
        let column = def.columns[*partition.first()?].name.clone();
        let (from, from_key) = bound(def, from).ok()?;
        let (to, to_key) = bound(def, to).ok()?;
        Some(PartitionLimit {
            column,
            from,
            to,
            from_key,
            to_key,
        })
    }

    /// Fails unless `from` and `to` bound a range of the table's partition
    /// key.
    pub fn check(def: &TableDef, from: &str, to: &str) -> Result<()> {
        bound(def, from)?;
        bound(def, to)?;
        Ok(())
    }

    /// The rows of the range, as a filter on the partition key column.
    pub fn filter(&self) -> Expr {
        let column = || Expr::Column(Column::new_unqualified(self.column.clone()));
        column()
            .gt_eq(lit(self.from.clone()))
            .and(column().lt_eq(lit(self.to.clone())))
    }

    fn contains(&self, partition_key: &str) -> bool {
        (self.from_key.as_str()..=self.to_key.as_str()).contains(&partition_key)
    }
}

impl Session {
    /// Fails unless every key is in the partitions the session's grant on
    /// the table covers.
    pub(super) fn require_partitions<'a>(
        &self,
        def: &TableDef,
        partition_keys: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        let Some(role) = self.role() else {
            return Ok(());
        };
        let Some(limit) = PartitionLimit::of(def, role) else {
            return Ok(());
        };
        match partition_keys.into_iter().find(|k| !limit.contains(k)) {
            Some(partition_key) => Err(denied(format!(
                "permission denied for table {}: partition key {partition_key:?} is outside the partitions \
                 granted to role {role:?}",
                def.name
            ))),
            None => Ok(()),
        }
    }
}

/// A leading SQL string literal: its text, and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('\'')?;
    let mut text = String::new();
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if chars.peek().map(|(_, c)| *c) == Some('\'') {
                chars.next();
                text.push('\'');
                continue;
            }
            return Some((text, body[i + 1..].trim_start()));
        }
        text.push(c);
    }
    None
}

/// A GRANT ending with `PARTITIONS 'from' TO 'to'`: the GRANT before it and
/// the two values.
pub(super) fn partitions_clause(sql: &str) -> Option<(&str, String, String)> {
    let lower = sql.to_ascii_lowercase();
    if !lower.trim_start().starts_with("grant") {
        return None;
    }
    let at = lower.rfind(" partitions ")?;
    let clause = sql[at + " partitions ".len()..]
        .trim()
        .trim_end_matches(';')
        .trim_end();
    let (from, rest) = quoted(clause)?;
    let rest = rest
        .get(..3)
        .filter(|w| w.eq_ignore_ascii_case("to "))
        .map(|_| rest[3..].trim_start())?;
    let (to, rest) = quoted(rest)?;
    rest.is_empty().then(|| (&sql[..at], from, to))
}

/// `GRANT ... ON table TO role PARTITIONS 'from' TO 'to'`; `None` for any
/// other statement.
pub async fn grant_partitions(session: &mut Session, sql: &str) -> Option<Result<Output>> {
    let (grant, from, to) = partitions_clause(sql)?;
    Some(
        async {
            session.check_not_failed()?;
            session.require_superuser("grant privileges")?;
            let statement = match Session::parse(grant)?.pop() {
                Some(datafusion::sql::parser::Statement::Statement(s)) => *s,
                _ => return Err(SqlError::Syntax(format!("not a GRANT: {grant}"))),
            };
            let Statement::Grant(g) = statement else {
                return Err(SqlError::Syntax(format!("not a GRANT: {grant}")));
            };
            let implicit = session.open_implicit();
            let result = grant_or_revoke(
                session,
                true,
                &g.privileges,
                g.objects.as_ref(),
                &g.grantees,
                Some((from, to)),
            );
            if implicit {
                session.close_implicit(result.is_ok()).await?;
            }
            result
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::partitions_clause;

    #[test]
    fn partition_clauses_are_read_from_the_end() {
        assert_eq!(
            partitions_clause("GRANT SELECT ON t TO bob PARTITIONS 'acme' TO 'acme';"),
            Some(("GRANT SELECT ON t TO bob", "acme".into(), "acme".into()))
        );
        assert_eq!(
            partitions_clause("grant all on t to bob partitions 'it''s' to 'z'"),
            Some(("grant all on t to bob", "it's".into(), "z".into()))
        );
        assert_eq!(partitions_clause("GRANT SELECT ON t TO bob"), None);
        assert_eq!(partitions_clause("SELECT ' partitions ' FROM t"), None);
        assert_eq!(
            partitions_clause("GRANT SELECT ON t TO bob PARTITIONS 'a' TO 'b' extra"),
            None
        );
    }
}
