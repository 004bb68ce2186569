//! Whole-table scans read a table's column copy (`read_from_copy` in
//! `EXPLAIN ANALYZE`), made after a bulk load or once a second scan finds
//! the table unchanged, with the same answers as the store's; a write, or a
//! transaction's own writes, send scans back to the store, as does `SET
//! tablegate.column_copies = off`.

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::common::{copy_lines, scan_metric, simple_rows, TestServer};

const ROWS: i64 = 30_000;

const SUMMARY: &str = "SELECT g, count(*), sum(n), max(v), min(id) FROM t GROUP BY g ORDER BY g";
const FILTERED: &str = "SELECT count(*), sum(id) FROM t WHERE n % 7 = 3 AND v LIKE 'v1%'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_table_scans_read_the_column_copy_while_the_table_is_unchanged() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE t (g int, id int, v text, n bigint, PRIMARY KEY (g, id));
             CREATE TABLE small (k int PRIMARY KEY, v text);
             INSERT INTO small VALUES (1, 'a'), (2, 'b');",
        )
        .await
        .unwrap();
    let lines: String = (0..ROWS)
        .map(|i| format!("{}\t{i}\tv{}\t{}\n", i % 13, i * 7 % 1000, i * 3))
        .collect();
    assert_eq!(copy_lines(&client, "t", lines).await.unwrap(), ROWS as u64);

    // The first whole-table scan after a bulk load makes the copy, waits
    // for it and reads it.
    assert_eq!(
        scan_metric(&client, SUMMARY, "t", "read_from_copy").await,
        ROWS as u64
    );
    let summary: Vec<Vec<String>> = (0..13)
        .map(|g| {
            let rows: Vec<i64> = (0..ROWS).filter(|i| i % 13 == g).collect();
            let max_v = rows.iter().map(|i| format!("v{}", i * 7 % 1000)).max();
            vec![
                g.to_string(),
                rows.len().to_string(),
                rows.iter().map(|i| i * 3).sum::<i64>().to_string(),
                max_v.unwrap(),
                rows[0].to_string(),
            ]
        })
        .collect();
    assert_eq!(simple_rows(&client, SUMMARY).await, summary);
    let expected: Vec<i64> = (0..ROWS)
        .filter(|i| (i * 3) % 7 == 3 && format!("v{}", i * 7 % 1000).starts_with("v1"))
        .collect();
    let filtered = vec![vec![
        expected.len().to_string(),
        expected.iter().sum::<i64>().to_string(),
    ]];
    assert_eq!(simple_rows(&client, FILTERED).await, filtered);

    let plan = simple_rows(&client, &format!("EXPLAIN {SUMMARY}")).await;
    assert!(
        plan.iter()
            .flatten()
            .any(|l| l.contains("from the column copy")),
        "{plan:?}"
    );
    assert_eq!(
        scan_metric(&client, SUMMARY, "t", "read_from_copy").await,
        ROWS as u64
    );
    assert_eq!(simple_rows(&client, SUMMARY).await, summary);
    assert_eq!(simple_rows(&client, FILTERED).await, filtered);
    // A session can send its scans to the store's records, for comparison,
    // and back.
    client
        .batch_execute("SET tablegate.column_copies = off")
        .await
        .unwrap();
    assert_eq!(
        scan_metric(&client, SUMMARY, "t", "read_from_copy").await,
        0
    );
    assert_eq!(simple_rows(&client, SUMMARY).await, summary);
    assert_eq!(simple_rows(&client, FILTERED).await, filtered);
    let refused = client
        .batch_execute("SET tablegate.column_copies = sometimes")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(&SqlState::INVALID_PARAMETER_VALUE));
    let message = refused.as_db_error().map(|e| e.message().to_owned());
    assert_eq!(
        message.as_deref(),
        Some("parameter \"tablegate.column_copies\" requires a Boolean value")
    );
    client
        .batch_execute("RESET tablegate.column_copies")
        .await
        .unwrap();
    assert_eq!(
        scan_metric(&client, SUMMARY, "t", "read_from_copy").await,
        ROWS as u64
    );
    // A limit ends the read early; a key range reads the store.
    let limited = simple_rows(&client, "SELECT id FROM t LIMIT 5").await;
    assert_eq!(limited.len(), 5);
    let keyed = "SELECT count(*) FROM t WHERE g = 3";
    assert_eq!(scan_metric(&client, keyed, "t", "read_from_copy").await, 0);
    // Small tables are not copied.
    for _ in 0..3 {
        assert_eq!(
            scan_metric(&client, "SELECT * FROM small", "small", "read_from_copy").await,
            0
        );
    }

    // A transaction's own writes are read from the store, merged.
    client
        .batch_execute("BEGIN; UPDATE t SET n = n + 1000000 WHERE g = 0 AND id = 0")
        .await
        .unwrap();
    let in_block = "SELECT sum(n) FROM t";
    assert_eq!(
        scan_metric(&client, in_block, "t", "read_from_copy").await,
        0
    );
    let total: i64 = (0..ROWS).map(|i| i * 3).sum();
    assert_eq!(
        simple_rows(&client, in_block).await,
        vec![vec![(total + 1_000_000).to_string()]]
    );
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        scan_metric(&client, in_block, "t", "read_from_copy").await,
        ROWS as u64
    );

    // A committed write: the copy no longer answers, and the answer changes.
    client
        .batch_execute("UPDATE t SET n = n + 1000000 WHERE g = 0 AND id = 0")
        .await
        .unwrap();
    assert_eq!(
        scan_metric(&client, in_block, "t", "read_from_copy").await,
        0
    );
    assert_eq!(
        simple_rows(&client, in_block).await,
        vec![vec![(total + 1_000_000).to_string()]]
    );
    // Unchanged again: the second scan makes a new copy, with the write in
    // it, and waits for it.
    assert_eq!(
        scan_metric(&client, in_block, "t", "read_from_copy").await,
        ROWS as u64
    );
    assert_eq!(
        simple_rows(&client, in_block).await,
        vec![vec![(total + 1_000_000).to_string()]]
    );

    // A new column: the copy does not have it. The rows did not change
    // since the last scan, so the next scan makes a copy that has it.
    client
        .batch_execute("ALTER TABLE t ADD COLUMN extra int")
        .await
        .unwrap();
    let with_extra = "SELECT count(*), count(extra) FROM t";
    assert_eq!(
        scan_metric(&client, with_extra, "t", "read_from_copy").await,
        ROWS as u64
    );
    assert_eq!(
        simple_rows(&client, with_extra).await,
        vec![vec![ROWS.to_string(), "0".to_string()]]
    );
}

/// The table's `column_copy` in `tablegate.tables`.
async fn copy_state(client: &Client, table: &str) -> String {
    let sql = format!("SELECT column_copy FROM tablegate.tables WHERE table_name = '{table}'");
    simple_rows(client, &sql).await.remove(0).remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_loaded_table_is_copied_once_no_other_load_follows() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE loaded (id int PRIMARY KEY, v text)")
        .await
        .unwrap();
    let lines = |from: i64| -> String {
        (from..from + ROWS)
            .map(|i| format!("{i}\tv{i}\n"))
            .collect()
    };
    assert_eq!(
        copy_lines(&client, "loaded", lines(0)).await.unwrap(),
        ROWS as u64
    );
    // No scan: the copy is made once the load has been alone for a while.
    let start = std::time::Instant::now();
    while copy_state(&client, "loaded").await != "ready" {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no column copy after a minute"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let whole = "SELECT count(*), max(v) FROM loaded";
    assert_eq!(
        scan_metric(&client, whole, "loaded", "read_from_copy").await,
        ROWS as u64
    );
    let max_v = |rows: i64| (0..rows).map(|i| format!("v{i}")).max().unwrap();
    assert_eq!(
        simple_rows(&client, whole).await,
        vec![vec![ROWS.to_string(), max_v(ROWS)]]
    );

    // A second load: the copy no longer holds the latest rows; the first
    // scan after it makes one and reads it.
    assert_eq!(
        copy_lines(&client, "loaded", lines(ROWS)).await.unwrap(),
        ROWS as u64
    );
    assert_eq!(
        scan_metric(&client, whole, "loaded", "read_from_copy").await,
        2 * ROWS as u64
    );
    assert_eq!(copy_state(&client, "loaded").await, "ready");
    assert_eq!(
        simple_rows(&client, whole).await,
        vec![vec![(2 * ROWS).to_string(), max_v(2 * ROWS)]]
    );
}
