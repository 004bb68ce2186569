//! GRANT and REVOKE: a role made with SQL reads and writes only what it was
//! given; a denied statement fails with 42501 and changes nothing. Roles
//! and grants are kept across restarts.

use crate::common;

use common::{count, TestServer};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

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
    let bob = server.client_as("bob").await;

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
    let bob = server.client_as("bob").await;
    denied(&bob, "SELECT * FROM orders").await;
    bob.batch_execute("INSERT INTO orders VALUES ('acme', 5, 50)")
        .await
        .unwrap();
    let admin = server.client().await;
    assert_eq!(count(&admin, "orders").await, 6);

    // A dropped role's grants go with it.
    admin.batch_execute("DROP ROLE bob").await.unwrap();
    admin.batch_execute("CREATE ROLE bob").await.unwrap();
    let bob = server.client_as("bob").await;
    denied(&bob, "INSERT INTO orders VALUES ('acme', 6, 60)").await;
}

/// A grant limited to a range of the partition key, as the seeds' shared
/// access signatures scope a key to a range: the role sees only those
/// partitions (the limit narrows what is read), and writes outside them
/// fail with 42501 and write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_limited_to_partitions() {
    let server = TestServer::start().await;
    let admin = server.client().await;
    admin
        .batch_execute(
            "CREATE TABLE orders (tenant text, id int, total int, PRIMARY KEY (tenant, id));
             INSERT INTO orders VALUES ('acme', 1, 10), ('acme', 2, 20), ('beta', 1, 7), ('zeta', 1, 5);
             CREATE TABLE shards (shard int, k int, PRIMARY KEY (shard, k));
             INSERT INTO shards SELECT s, 1 FROM generate_series(1, 120) AS g(s);
             CREATE TABLE loose (v int);
             CREATE ROLE acme_app",
        )
        .await
        .unwrap();
    // A grant with PARTITIONS is a statement of its own.
    for grant in [
        "GRANT SELECT, INSERT, UPDATE, DELETE ON orders TO acme_app PARTITIONS 'acme' TO 'acme'",
        "GRANT SELECT ON shards TO acme_app PARTITIONS '10' TO '19'",
    ] {
        admin.batch_execute(grant).await.unwrap();
    }
    let app = server.client_as("acme_app").await;

    // Reads see the granted partitions only, and read only them.
    let rows = common::simple_rows(&app, "SELECT tenant, id FROM orders ORDER BY id").await;
    assert_eq!(rows, [["acme", "1"], ["acme", "2"]]);
    assert_eq!(
        common::simple_rows(&app, "SELECT * FROM orders WHERE tenant = 'zeta'")
            .await
            .len(),
        0
    );
    let plan = common::simple_rows(&app, "EXPLAIN SELECT * FROM orders").await;
    let scan = plan
        .iter()
        .map(|r| r[1].clone())
        .find(|p| p.contains("StoreScan"))
        .unwrap();
    assert!(
        scan.contains("access=range") || scan.contains("access=partition"),
        "{scan}"
    );
    assert!(scan.contains("acme"), "{scan}");
    // A prepared point query (the fast path for others) sees the limit too.
    let point = app
        .prepare("SELECT total FROM orders WHERE tenant = $1 AND id = $2")
        .await
        .unwrap();
    assert_eq!(app.query(&point, &[&"zeta", &1]).await.unwrap().len(), 0);
    assert_eq!(app.query(&point, &[&"acme", &1]).await.unwrap().len(), 1);
    // Numeric keys compare as numbers: shards 10 to 19, not "100".
    let shards =
        common::simple_rows(&app, "SELECT min(shard), max(shard), count(*) FROM shards").await;
    assert_eq!(shards, [["10", "19", "10"]]);

    // Writes inside the range go through; outside it, nothing is written.
    app.batch_execute("INSERT INTO orders VALUES ('acme', 3, 30)")
        .await
        .unwrap();
    let message = denied(&app, "INSERT INTO orders VALUES ('zeta', 9, 90)").await;
    assert_eq!(
        message,
        "permission denied for table orders: partition key \"zeta\" is outside the partitions \
         granted to role \"acme_app\""
    );
    denied(
        &app,
        "INSERT INTO orders VALUES ('acme', 4, 40), ('beta', 9, 90)",
    )
    .await;
    denied(&app, "UPDATE orders SET tenant = 'zeta' WHERE id = 1").await;
    // A DELETE of everything deletes what the role sees.
    app.batch_execute("DELETE FROM orders").await.unwrap();
    let left = common::simple_rows(&admin, "SELECT tenant, id FROM orders ORDER BY tenant").await;
    assert_eq!(left, [["beta", "1"], ["zeta", "1"]]);
    // COPY too.
    {
        use futures::SinkExt;
        let sink = app.copy_in("COPY orders FROM STDIN").await.unwrap();
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(b"acme\t7\t70\nzeta\t7\t70\n"))
            .await
            .unwrap();
        let error = sink.finish().await.unwrap_err();
        assert_eq!(error.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE));
    }
    assert_eq!(count(&admin, "orders").await, 2);

    // Ranges need a one-column partition key and values of its type.
    let error = admin
        .batch_execute("GRANT SELECT ON loose TO acme_app PARTITIONS 'a' TO 'b'")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED));
    let error = admin
        .batch_execute("GRANT SELECT ON shards TO acme_app PARTITIONS 'ten' TO '19'")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::INVALID_TEXT_REPRESENTATION));
    // A grant without a range gives every partition again.
    admin
        .batch_execute("REVOKE SELECT ON shards FROM acme_app; GRANT SELECT ON shards TO acme_app")
        .await
        .unwrap();
    assert_eq!(count(&app, "shards").await, 120);
}
