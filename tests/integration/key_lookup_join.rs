//! Joins on another table's key or indexed column: that table is read by
//! point gets (or partition scans, or index lookups) of the keys the join's
//! other side holds (counted by `EXPLAIN ANALYZE`'s
//! `entities_read`), and the results equal those of whole-table scans.

use crate::common;

use common::TestServer;

/// `entities_read` of the scan of `table` in an `EXPLAIN ANALYZE`.
async fn entities_read(client: &tokio_postgres::Client, sql: &str, table: &str) -> u64 {
    common::scan_metric(client, sql, table, "entities_read").await
}

async fn rows(client: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    let mut out: Vec<String> = client
        .query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| format!("{}/{}", r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_on_a_key_read_only_the_matching_rows() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE departments (id int PRIMARY KEY, name text);
             INSERT INTO departments SELECT v, 'dept ' || v FROM generate_series(1, 5000) AS t(v);
             CREATE TABLE orders (customer int, n int, total int, PRIMARY KEY (customer, n));
             INSERT INTO orders SELECT v % 500, v, v FROM generate_series(1, 5000) AS t(v);
             CREATE TABLE employees (dept int, id int, name text, PRIMARY KEY (dept, id));
             INSERT INTO employees SELECT (v * 37) % 6000, v, 'e' || v FROM generate_series(1, 1000) AS t(v);
             CREATE TABLE accounts (region int, n int, owner int, PRIMARY KEY (region, n));
             INSERT INTO accounts SELECT v % 7, v, v % 900 FROM generate_series(1, 4500) AS t(v);
             CREATE INDEX accounts_owner ON accounts (owner)",
        )
        .await
        .unwrap();

    // A few employees: their departments by point gets.
    let few = "SELECT e.name, d.name FROM employees e JOIN departments d ON e.dept = d.id WHERE e.id <= 20";
    assert_eq!(entities_read(&client, few, "departments").await, 20);
    // A join on the partition key of a compound key: partition scans.
    let by_partition = "SELECT e.name, CAST(o.total AS text) FROM employees e JOIN orders o ON o.customer = e.dept WHERE e.id <= 3";
    let read = entities_read(&client, by_partition, "orders").await;
    assert!(read <= 30, "{read} orders read for 3 customers");
    // A join on an indexed column: the index's entries, then their rows.
    let by_index = "SELECT e.name, CAST(a.n AS text) FROM employees e JOIN accounts a ON a.owner = e.id WHERE e.name IN ('e1', 'e2', 'e3', 'e4')";
    assert_eq!(entities_read(&client, by_index, "accounts").await, 20);
    // Many employees (more distinct keys than the join lists): the table
    // is scanned, with the same results.
    let many = "SELECT e.name, d.name FROM employees e JOIN departments d ON e.dept = d.id";
    assert_eq!(entities_read(&client, many, "departments").await, 5000);

    for sql in [few, by_partition, by_index, many] {
        let looked_up = rows(&client, sql).await;
        client
            .batch_execute("SET tablegate.pushdown = off")
            .await
            .unwrap();
        if sql == few {
            assert_eq!(entities_read(&client, sql, "departments").await, 5000);
        }
        let scanned = rows(&client, sql).await;
        client
            .batch_execute("SET tablegate.pushdown = on")
            .await
            .unwrap();
        assert!(!looked_up.is_empty());
        assert_eq!(looked_up, scanned, "{sql}");
    }
    // RESET and DISCARD ALL turn pushdown back on.
    for reset in ["RESET tablegate.pushdown", "RESET ALL", "DISCARD ALL"] {
        client
            .batch_execute("SET tablegate.pushdown = off")
            .await
            .unwrap();
        assert_eq!(entities_read(&client, few, "departments").await, 5000);
        client.batch_execute(reset).await.unwrap();
        assert_eq!(
            entities_read(&client, few, "departments").await,
            20,
            "{reset}"
        );
    }
}

/// A scan read by lookups gives its rows in the key order it declared,
/// which an ORDER BY of the key relies on without sorting again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_looked_up_come_in_key_order() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE departments (id int PRIMARY KEY, name text);
             INSERT INTO departments SELECT v, 'dept ' || v FROM generate_series(1, 2000) AS t(v);
             CREATE TABLE employees (id int PRIMARY KEY, dept int, pay int);
             INSERT INTO employees SELECT v, 1999 - 97 * v % 2000, v FROM generate_series(1, 30) AS t(v);
             CREATE TABLE accounts (region int, n int, owner int, PRIMARY KEY (region, n));
             INSERT INTO accounts SELECT v % 7, v, v % 40 FROM generate_series(1, 400) AS t(v);
             CREATE INDEX accounts_owner ON accounts (owner)",
        )
        .await
        .unwrap();
    for sql in [
        "SELECT d.id, d.id FROM departments d WHERE d.id IN (SELECT e.dept FROM employees e) ORDER BY d.id",
        "SELECT d.id, e.pay FROM employees e JOIN departments d ON d.id = e.dept ORDER BY d.id",
        "SELECT a.region, a.n FROM employees e JOIN accounts a ON a.owner = e.pay WHERE e.id < 5 ORDER BY a.region, a.n",
    ] {
        let rows: Vec<(i32, i32)> = (client.query(sql, &[]).await.unwrap().iter())
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let mut sorted = rows.clone();
        sorted.sort();
        assert!(rows.len() >= 10, "{sql}: {rows:?}");
        assert_eq!(rows, sorted, "{sql}");
    }
}
