//! GRANT and REVOKE: a role made with SQL reads and writes only what it was
//! given; a denied statement fails with 42501 and changes nothing. Roles
//! and grants are kept across restarts.

mod common;

use common::TestServer;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

async fn as_user(server: &TestServer, user: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={} user={user}", server.port),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connect");
    tokio::spawn(connection);
    client
}

async fn denied(client: &Client, sql: &str) -> String {
    let error = client
        .simple_query(sql)
        .await
        .err()
        .unwrap_or_else(|| panic!("{sql} was allowed"));
    assert_eq!(
        error.code(),
        Some(&SqlState::INSUFFICIENT_PRIVILEGE),
        "{sql}: {error:?}"
    );
    error.as_db_error().unwrap().message().to_owned()
}

async fn count(client: &Client, table: &str) -> i64 {
    client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_decide_what_a_role_reads_and_writes() {
    let server = TestServer::start().await;
    let admin = server.client().await;
    admin
        .batch_execute(
            "CREATE TABLE orders (tenant text, id int, total int, PRIMARY KEY (tenant, id));
             INSERT INTO orders VALUES ('acme', 1, 10), ('acme', 2, 20), ('zeta', 1, 5);
             CREATE TABLE salaries (name text PRIMARY KEY, pay int);
             INSERT INTO salaries VALUES ('ann', 100);
             CREATE ROLE bob LOGIN PASSWORD 'pw'",
        )
        .await
        .unwrap();
    let roles = common::simple_rows(
        &admin,
        "SELECT rolname, rolsuper, rolcanlogin FROM pg_roles ORDER BY rolname",
    )
    .await;
    assert_eq!(roles, [["bob", "f", "t"], ["tablegate", "t", "t"]]);
    let bob = as_user(&server, "bob").await;

    // Nothing granted yet.
    let message = denied(&bob, "SELECT * FROM orders").await;
    assert_eq!(
        message,
        "permission denied for table orders: role \"bob\" has no SELECT privilege on it"
    );
    denied(&bob, "INSERT INTO orders VALUES ('acme', 3, 30)").await;
    denied(&bob, "CREATE TABLE mine (k int PRIMARY KEY)").await;
    denied(&bob, "GRANT SELECT ON orders TO bob").await;
    denied(&bob, "DROP TABLE salaries").await;
    denied(&bob, "TRUNCATE salaries").await;
    assert_eq!(count(&admin, "orders").await, 3);

    // SELECT: by every path (simple, extended, the point fast path).
    admin
        .batch_execute("GRANT SELECT ON orders TO bob")
        .await
        .unwrap();
    assert_eq!(count(&bob, "orders").await, 3);
    let point = bob
        .prepare("SELECT total FROM orders WHERE tenant = $1 AND id = $2")
        .await
        .unwrap();
    let row = bob.query_one(&point, &[&"acme", &2]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 20);
    // A query that also reads a table not granted is refused whole.
    denied(
        &bob,
        "SELECT o.id FROM orders o JOIN salaries s ON s.pay = o.total",
    )
    .await;
    denied(&bob, "SELECT (SELECT max(pay) FROM salaries) FROM orders").await;
    denied(&bob, "COPY salaries TO STDOUT").await;
    // Still no writes, and nothing was written.
    denied(&bob, "INSERT INTO orders VALUES ('acme', 3, 30)").await;
    denied(&bob, "UPDATE orders SET total = 0").await;
    denied(&bob, "DELETE FROM orders").await;
    assert_eq!(count(&admin, "orders").await, 3);

    // INSERT and UPDATE, not DELETE.
    admin
        .batch_execute("GRANT INSERT, UPDATE ON orders TO bob")
        .await
        .unwrap();
    bob.batch_execute("INSERT INTO orders VALUES ('acme', 3, 30)")
        .await
        .unwrap();
    bob.execute("UPDATE orders SET total = total + 1 WHERE id = 1", &[])
        .await
        .unwrap();
    denied(&bob, "DELETE FROM orders WHERE id = 3").await;
    // Writing from a table not granted is refused.
    denied(
        &bob,
        "INSERT INTO orders SELECT 'ann', 9, pay FROM salaries",
    )
    .await;
    assert_eq!(count(&admin, "orders").await, 4);
    let totals: i64 = admin
        .query_one("SELECT sum(total) FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(totals, 10 + 20 + 5 + 30 + 2);

    // REVOKE takes effect at the next statement of an open session.
    admin
        .batch_execute("REVOKE SELECT ON orders FROM bob")
        .await
        .unwrap();
    denied(&bob, "SELECT * FROM orders").await;
    let error = bob.query_one(&point, &[&"acme", &2]).await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE));
    bob.batch_execute("INSERT INTO orders VALUES ('acme', 4, 40)")
        .await
        .unwrap();

    // Errors name what is wrong.
    let error = admin
        .batch_execute("GRANT SELECT ON orders TO nobody")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNDEFINED_OBJECT));
    let error = admin.batch_execute("CREATE ROLE bob").await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::DUPLICATE_OBJECT));

    // Roles and grants survive a restart.
    drop(bob);
    drop(admin);
    let server = TestServer::start_in(server.stop().await).await;
    let bob = as_user(&server, "bob").await;
    denied(&bob, "SELECT * FROM orders").await;
    bob.batch_execute("INSERT INTO orders VALUES ('acme', 5, 50)")
        .await
        .unwrap();
    let admin = server.client().await;
    assert_eq!(count(&admin, "orders").await, 6);

    // A dropped role's grants go with it.
    admin.batch_execute("DROP ROLE bob").await.unwrap();
    admin.batch_execute("CREATE ROLE bob").await.unwrap();
    let bob = as_user(&server, "bob").await;
    denied(&bob, "INSERT INTO orders VALUES ('acme', 6, 60)").await;
}
