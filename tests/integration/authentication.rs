//! SCRAM-SHA-256 against a user list, TLS with a given certificate, and the
//! user a session runs as.

use crate::common;

use std::process::Command;

use tablegate::pg::{tls_acceptor, TlsAcceptor};

async fn start(tls: Option<TlsAcceptor>) -> (u16, tempfile::TempDir) {
    common::start_scram("alice:s3cret\nbob:hunter2\n", tls).await
}

async fn connect(
    port: u16,
    user: &str,
    password: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user={user} password={password}"),
        tokio_postgres::NoTls,
    )
    .await?;
    tokio::spawn(connection);
    Ok(client)
}

fn code(e: &tokio_postgres::Error) -> Option<String> {
    e.as_db_error().map(|d| d.code().code().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_accepts_the_right_password_only() {
    let (port, _dir) = start(None).await;

    let alice = connect(port, "alice", "s3cret").await.unwrap();
    let row = alice
        .query_one("SELECT current_user, session_user", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "alice");
    assert_eq!(row.get::<_, String>(1), "alice");

    let wrong = connect(port, "alice", "S3cret")
        .await
        .expect_err("wrong password refused");
    assert_eq!(code(&wrong).as_deref(), Some("28P01"), "{wrong}");
    let unknown = connect(port, "mallory", "s3cret")
        .await
        .expect_err("unknown user refused");
    assert_eq!(code(&unknown).as_deref(), Some("28P01"), "{unknown}");

    // The refused attempts leave the server serving.
    let bob = connect(port, "bob", "hunter2").await.unwrap();
    assert_eq!(
        bob.query_one("SELECT 1 + 1", &[])
            .await
            .unwrap()
            .get::<_, i32>(0),
        2
    );
}

/// TLS through psql (libpq), with a certificate made by openssl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_from_psql() {
    let psql_missing = Command::new("psql").arg("--version").output().is_err();
    let openssl_missing = Command::new("openssl").arg("version").output().is_err();
    if psql_missing || openssl_missing {
        panic!("this test needs psql and openssl (scripts/test installs them)");
    }
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (port, _dir) = start(Some(tls_acceptor(&cert, &key).unwrap())).await;

    let psql = move |password: &'static str, sslmode: &'static str| {
        tokio::task::spawn_blocking(move || {
            Command::new("psql")
                .arg(format!(
                    "host=127.0.0.1 port={port} user=alice sslmode={sslmode}"
                ))
                .args([
                    "-X",
                    "-A",
                    "-t",
                    "-c",
                    "\\conninfo",
                    "-c",
                    "SELECT current_user",
                ])
                .env("PGPASSWORD", password)
                .output()
                .unwrap()
        })
    };
    let out = psql("s3cret", "require").await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("SSL connection (protocol: TLSv1.3"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("alice"), "{stdout}");

    let out = psql("wrong", "require").await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("authentication failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // TLS is offered, not imposed: a client may still connect in the clear.
    let out = psql("s3cret", "disable").await.unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("SSL connection"));
}

/// A role made with SQL logs in with the password it was given (SCRAM), and
/// only with it; the server's listed users stay superusers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_made_with_sql_log_in_with_their_password() {
    let (port, _dir) = start(None).await;
    let alice = connect(port, "alice", "s3cret").await.unwrap();
    alice
        .batch_execute("CREATE ROLE carol LOGIN PASSWORD 'c4rol''s'")
        .await
        .unwrap();
    let carol = connect(port, "carol", "c4rol's")
        .await
        .expect("carol logs in");
    let row = carol.query_one("SELECT current_user", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "carol");
    let wrong = connect(port, "carol", "c4rol").await.expect_err("refused");
    assert_eq!(
        wrong.code(),
        Some(&tokio_postgres::error::SqlState::INVALID_PASSWORD)
    );
    // A new password replaces the old one.
    alice
        .batch_execute("ALTER ROLE carol WITH PASSWORD 'n3w'")
        .await
        .unwrap();
    assert!(connect(port, "carol", "c4rol's").await.is_err());
    connect(port, "carol", "n3w")
        .await
        .expect("the new password");
    // Carol is not a superuser: she cannot make roles.
    let error = carol.batch_execute("CREATE ROLE dave").await.unwrap_err();
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
    alice.batch_execute("DROP ROLE carol").await.unwrap();
    assert!(connect(port, "carol", "n3w").await.is_err());
}
