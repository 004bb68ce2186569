//! The seeds' anti-patterns, produced on purpose against a live server:
//! each must show in the `tablegate` views, earn a NOTICE naming the
//! pattern that fixes it, and turn into advice from `TABLEGATE ADVISE`.

use crate::common;

use common::{simple_rows as rows, TestServer};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_postgres::Client;

/// Every notice received so far.
fn drain(notices: &mut UnboundedReceiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(n) = notices.try_recv() {
        out.push(n);
    }
    out
}

async fn advice(client: &Client, table: &str) -> Vec<(String, String, String)> {
    rows(client, &format!("TABLEGATE ADVISE {table}"))
        .await
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_density_scans_warn_show_in_the_log_and_ask_for_an_index() {
    let server = TestServer::start().await;
    let (client, mut notices) = server.client_with_notices().await;
    client
        .batch_execute(
            "CREATE TABLE people (id int PRIMARY KEY, email text, city text);
             INSERT INTO people SELECT v, 'p' || v || '@example.com', 'city' || (v % 7)
               FROM generate_series(1, 3000) AS t(v);",
        )
        .await
        .unwrap();
    drain(&mut notices);

    // By the extended protocol (rows read through a portal) ...
    let found = client
        .query(
            "SELECT id FROM people WHERE email = $1",
            &[&"p42@example.com"],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let received = drain(&mut notices);
    assert_eq!(received.len(), 1, "{received:?}");
    let warning = &received[0];
    for part in [
        "low query density",
        "\"people\"",
        "read 3000 entities to return 1 rows",
        "an index on (email)",
        "inter-partition secondary index pattern",
    ] {
        assert!(warning.contains(part), "{part:?} not in {warning}");
    }
    // ... and by the simple protocol.
    for _ in 0..2 {
        rows(
            &client,
            "SELECT id FROM people WHERE email = 'p7@example.com'",
        )
        .await;
    }
    assert_eq!(drain(&mut notices).len(), 2);
    // UPDATE and DELETE read rows the same way.
    let updated = client
        .execute(
            "UPDATE people SET city = 'moved' WHERE email = 'p8@example.com'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(updated, 1);
    let received = drain(&mut notices);
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        received[0].contains("read 3000 entities to return 1 rows; an index on (email)"),
        "{}",
        received[0]
    );
    // A scan that returns what it reads is fine.
    rows(&client, "SELECT count(*) FROM people").await;
    rows(&client, "SELECT * FROM people WHERE id = 5").await;
    assert_eq!(drain(&mut notices), Vec::<String>::new());

    let log = rows(
        &client,
        "SELECT query, table_name, access, entities_read, rows_returned, density, filter_columns
         FROM tablegate.queries WHERE table_name = 'people' ORDER BY query_id",
    )
    .await;
    assert_eq!(
        log[0],
        [
            "SELECT id FROM people WHERE email = $1",
            "people",
            "table",
            "3000",
            "1",
            &(1.0 / 3000.0).to_string(),
            "email"
        ]
    );
    assert!(log[3][0].starts_with("UPDATE people"), "{:?}", log[3]);
    assert_eq!(log[3][3..5], ["3000", "1"]);
    assert_eq!(log[4][2..6], ["table", "3000", "3000", "1"]);
    assert!(log[5][2].starts_with("point"), "{:?}", log[5]);
    assert_eq!(log[5][3..6], ["1", "1", "1"]);

    let advised = advice(&client, "people").await;
    let index = advised
        .iter()
        .find(|a| a.1.starts_with("CREATE INDEX"))
        .unwrap_or_else(|| panic!("no index advised: {advised:?}"));
    assert_eq!(index.1, "CREATE INDEX people_email_idx ON people (email)");
    assert!(
        index.0.contains("4 recent statements filtered"),
        "{}",
        index.0
    );
    assert!(index.2.contains("inter-partition secondary index pattern"));

    // The advice taken: the lookup reads one entity, and no advice is left.
    client.batch_execute(&index.1).await.unwrap();
    drain(&mut notices);
    rows(
        &client,
        "SELECT id FROM people WHERE email = 'p9@example.com'",
    )
    .await;
    assert_eq!(drain(&mut notices), Vec::<String>::new());
    let last = rows(
        &client,
        "SELECT access, entities_read FROM tablegate.queries WHERE table_name = 'people'
         ORDER BY query_id DESC LIMIT 1",
    )
    .await;
    assert!(last[0][0].starts_with("index people_email_idx"), "{last:?}");
    assert_eq!(last[0][1], "1");
    let advised = advice(&client, "people").await;
    assert!(
        advised.iter().all(|a| !a.1.starts_with("CREATE INDEX")),
        "{advised:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_one_partition_are_a_hot_partition() {
    let server = TestServer::start().await;
    let (client, mut notices) = server.client_with_notices().await;
    client
        .batch_execute(
            "CREATE TABLE events (tenant text, id int, body text, PRIMARY KEY (tenant, id))",
        )
        .await
        .unwrap();
    for id in 0..40 {
        let tenant = if id % 10 == 9 {
            format!("t{id}")
        } else {
            "acme".into()
        };
        client
            .execute("INSERT INTO events VALUES ($1, $2, 'x')", &[&tenant, &id])
            .await
            .unwrap();
    }
    // Once a minute per session, not on every write.
    let received = drain(&mut notices);
    assert_eq!(received.len(), 1, "{received:?}");
    for part in [
        "hot partition",
        "18 of the last 20 statements writing \"events\" wrote partition \"acme\"",
        "compound key pattern",
    ] {
        assert!(
            received[0].contains(part),
            "{part:?} not in {}",
            received[0]
        );
    }
    // Reads by key count against their partition.
    for _ in 0..5 {
        rows(
            &client,
            "SELECT * FROM events WHERE tenant = 'acme' AND id = 3",
        )
        .await;
    }
    let partitions = rows(
        &client,
        "SELECT partition_key, entities, reads, writes, hot_rank, writes_per_second > 0
         FROM tablegate.partitions WHERE table_name = 'events' ORDER BY hot_rank LIMIT 2",
    )
    .await;
    assert_eq!(partitions[0], ["acme", "36", "5", "36", "1", "t"]);
    assert_eq!(partitions[1][3], "1");
    let table = rows(
        &client,
        "SELECT reads, writes, write_pattern FROM tablegate.tables WHERE table_name = 'events'",
    )
    .await;
    assert_eq!(table[0], ["5", "40", "hot partition \"acme\""]);
    let advised = advice(&client, "events").await;
    assert!(
        advised
            .iter()
            .any(|a| a.0.starts_with("hot partition") && a.1.contains("partition key")),
        "{advised:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn increasing_and_decreasing_keys_are_append_and_prepend_only() {
    let server = TestServer::start().await;
    let (client, mut notices) = server.client_with_notices().await;
    client
        .batch_execute(
            "CREATE TABLE log (at text, seq int, message text, PRIMARY KEY (at, seq));
             CREATE TABLE countdown (k int, v int, PRIMARY KEY (k, v));",
        )
        .await
        .unwrap();
    for minute in 0..30 {
        client
            .batch_execute(&format!(
                "INSERT INTO log VALUES ('2026-11-22T01:{minute:02}', 1, 'started'),
                                        ('2026-11-22T01:{minute:02}', 2, 'done')"
            ))
            .await
            .unwrap();
    }
    for k in (0..30).rev() {
        client
            .batch_execute(&format!("INSERT INTO countdown VALUES ({k}, 0)"))
            .await
            .unwrap();
    }
    let received = drain(&mut notices);
    assert_eq!(received.len(), 2, "{received:?}");
    assert!(
        received[0].starts_with("append-only writes: 20 of the last 20 statements writing \"log\""),
        "{}",
        received[0]
    );
    assert!(received[0].contains("prepend/append anti-pattern"));
    assert!(
        received[1]
            .starts_with("prepend-only writes: 20 of the last 20 statements writing \"countdown\""),
        "{}",
        received[1]
    );
    let patterns = rows(
        &client,
        "SELECT table_name, write_pattern FROM tablegate.tables ORDER BY table_name",
    )
    .await;
    assert_eq!(
        patterns,
        [["countdown", "prepend-only"], ["log", "append-only"]]
    );
    let advised = advice(&client, "log").await;
    assert!(
        advised
            .iter()
            .any(|a| a.1.contains("bucket") && a.2.contains("prepend/append anti-pattern")),
        "{advised:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_near_the_entity_limits_warn() {
    let server = TestServer::start().await;
    let (client, mut notices) = server.client_with_notices().await;
    let columns: Vec<String> = (0..230).map(|i| format!("c{i} int")).collect();
    client
        .batch_execute(&format!(
            "CREATE TABLE blobs (k int PRIMARY KEY, body text);
             CREATE TABLE wide (k int PRIMARY KEY, {})",
            columns.join(", ")
        ))
        .await
        .unwrap();
    client
        .execute("INSERT INTO blobs VALUES (1, $1)", &[&"x".repeat(1000)])
        .await
        .unwrap();
    assert_eq!(drain(&mut notices), Vec::<String>::new());
    client
        .execute("INSERT INTO blobs VALUES (2, $1)", &[&"x".repeat(480_000)])
        .await
        .unwrap();
    let received = drain(&mut notices);
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        received[0].starts_with("blobs: row (k)=(2) is 960"),
        "{}",
        received[0]
    );
    assert!(received[0].contains("large entities pattern"));
    let values: Vec<String> = (0..230).map(|i| i.to_string()).collect();
    client
        .batch_execute(&format!(
            "INSERT INTO wide VALUES (1, {})",
            values.join(", ")
        ))
        .await
        .unwrap();
    let received = drain(&mut notices);
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        received[0].starts_with("wide: row (k)=(1) has 230 properties"),
        "{}",
        received[0]
    );
    assert!(received[0].contains("wide entities pattern"));
    // COPY counts its rows near the limits in one warning (a table of
    // its own: a topic warns once a minute).
    client
        .batch_execute("CREATE TABLE loaded (k int PRIMARY KEY, body text)")
        .await
        .unwrap();
    let big = "y".repeat(480_000);
    let lines = format!("3\t{big}\n4\tsmall\n5\t{big}\n");
    assert_eq!(
        common::copy_lines(&client, "loaded", lines).await.unwrap(),
        3
    );
    let received = drain(&mut notices);
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        received[0].starts_with("loaded: row (k)=(3) is 960"),
        "{}",
        received[0]
    );
    assert!(
        received[0].ends_with("(2 such rows in this statement)"),
        "{}",
        received[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advice_from_key_spread_log_tails_and_repeated_aggregates() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE readings (sensor text, at int, value int, PRIMARY KEY (sensor, at));
             INSERT INTO readings SELECT 'boiler', v, v % 100 FROM generate_series(1, 1500) AS t(v);
             INSERT INTO readings SELECT 'pump', v, v % 10 FROM generate_series(1, 100) AS t(v);",
        )
        .await
        .unwrap();
    // A small table is fine as it is.
    client
        .batch_execute("CREATE TABLE tiny (k int PRIMARY KEY); INSERT INTO tiny VALUES (1)")
        .await
        .unwrap();
    let advised = advice(&client, "tiny").await;
    assert_eq!(advised.len(), 1);
    assert!(advised[0].0.starts_with("nothing to change"), "{advised:?}");

    for _ in 0..3 {
        rows(
            &client,
            "SELECT * FROM readings WHERE sensor = 'boiler' ORDER BY at DESC LIMIT 5",
        )
        .await;
        rows(
            &client,
            "SELECT sensor, max(value) FROM readings GROUP BY sensor",
        )
        .await;
    }
    let advised = advice(&client, "readings").await;
    let find = |pattern: &str| {
        advised
            .iter()
            .find(|a| a.2.starts_with(pattern))
            .unwrap_or_else(|| panic!("no {pattern}: {advised:?}"))
            .clone()
    };
    let spread = find("compound key pattern");
    assert!(
        spread
            .0
            .starts_with("1500 of the 1600 rows of \"readings\" (94%) are in one partition"),
        "{}",
        spread.0
    );
    assert!(
        spread
            .1
            .contains("PRIMARY KEY (sensor, at) WITH (partition_key = 'sensor, at')"),
        "{}",
        spread.1
    );
    let tail = find("log tail pattern");
    assert!(tail
        .0
        .starts_with("3 recent statements read \"readings\" in descending"));
    let view = find("materialized view pattern");
    assert_eq!(
        view.1,
        "CREATE MATERIALIZED VIEW readings_summary AS SELECT sensor, max(value) FROM readings \
         GROUP BY sensor (writes keep it current; the query then reads stored rows)"
    );
    // The advice is a working statement.
    let create = view.1.split(" (writes keep").next().unwrap();
    client.batch_execute(create).await.unwrap();
    let summary = rows(&client, "SELECT * FROM readings_summary ORDER BY 1").await;
    assert_eq!(summary, [["boiler", "99"], ["pump", "9"]]);

    let missing = client
        .simple_query("TABLEGATE ADVISE nowhere")
        .await
        .unwrap_err();
    assert_eq!(
        missing.code(),
        Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_and_views_show_lag_and_their_last_check() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL);
             INSERT INTO t SELECT v, v % 5 FROM generate_series(1, 50) AS t(v);
             CREATE INDEX t_v ON t (v);
             CREATE MATERIALIZED VIEW per_v AS SELECT v, count(*) AS n FROM t GROUP BY v;
             CREATE MATERIALIZED VIEW shouted AS SELECT k, upper(CAST(v AS text)) AS s FROM t;",
        )
        .await
        .unwrap();
    let before = rows(
        &client,
        "SELECT index_name, entries, bytes > 0, lag_seconds, last_verified IS NULL FROM tablegate.indexes",
    )
    .await;
    assert_eq!(before, [["t_v", "50", "t", "0", "t"]]);
    client.batch_execute("VERIFY INDEX t_v").await.unwrap();
    client
        .batch_execute("VERIFY MATERIALIZED VIEW per_v")
        .await
        .unwrap();
    client
        .batch_execute("REFRESH MATERIALIZED VIEW shouted")
        .await
        .unwrap();
    let after = rows(
        &client,
        "SELECT index_name, last_verified > now() - INTERVAL '1 minute', last_verify_differences
         FROM tablegate.indexes",
    )
    .await;
    assert_eq!(after, [["t_v", "t", "0"]]);
    let views = rows(
        &client,
        "SELECT view_name, maintained, rows, lag_seconds < 60, last_refreshed IS NULL,
                last_verify_differences
         FROM tablegate.materialized_views ORDER BY view_name",
    )
    .await;
    assert_eq!(
        views,
        [
            ["per_v", "t", "5", "t", "t", "0"],
            ["shouted", "f", "50", "t", "f", "NULL"]
        ]
    );
    // A refreshed view's lag grows until the next refresh.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let lag = rows(
        &client,
        "SELECT lag_seconds >= 0.3 FROM tablegate.materialized_views WHERE view_name = 'shouted'",
    )
    .await;
    assert_eq!(lag, [["t"]]);
}
