//! Scans of large tables are cut by PartitionKey ranges and read in parallel;
//! the pieces together return every row once, and key order survives.

use crate::common;

use common::TestServer;
use futures::SinkExt;

const PARTITIONS: i64 = 400;
const ROWS_PER_PARTITION: i64 = 100;

async fn load(client: &tokio_postgres::Client) {
    client
        .batch_execute(
            "CREATE TABLE readings (site int, seq int, v bigint, PRIMARY KEY (site, seq))",
        )
        .await
        .unwrap();
    let sink = client
        .copy_in("COPY readings FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    let mut data = String::new();
    for site in 0..PARTITIONS {
        for seq in 0..ROWS_PER_PARTITION {
            data.push_str(&format!("{site},{seq},{}\n", site * 1000 + seq));
        }
    }
    sink.send(bytes::Bytes::from(data)).await.unwrap();
    assert_eq!(
        sink.finish().await.unwrap(),
        (PARTITIONS * ROWS_PER_PARTITION) as u64
    );
}

async fn plan(client: &tokio_postgres::Client, sql: &str) -> String {
    client
        .simple_query(&format!("EXPLAIN {sql}"))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(1).map(str::to_owned),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_scans_run_in_parallel_pieces() {
    let server = TestServer::start().await;
    let client = server.client().await;
    load(&client).await;

    // Whole-table aggregate: two pieces, every row counted once.
    let sql = "SELECT count(*), sum(v)::bigint FROM readings";
    assert!(plan(&client, sql).await.contains("access=table, splits=2"));
    let row = client.query_one(sql, &[]).await.unwrap();
    let expected_sum: i64 = (0..PARTITIONS)
        .flat_map(|s| (0..ROWS_PER_PARTITION).map(move |q| s * 1000 + q))
        .sum();
    assert_eq!(row.get::<_, i64>(0), PARTITIONS * ROWS_PER_PARTITION);
    assert_eq!(row.get::<_, i64>(1), expected_sum);

    // Key order across pieces: the merge keeps it.
    let rows = client
        .query("SELECT site, seq FROM readings ORDER BY site, seq", &[])
        .await
        .unwrap();
    let keys: Vec<(i32, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected: Vec<(i32, i32)> = (0..PARTITIONS as i32)
        .flat_map(|s| (0..ROWS_PER_PARTITION as i32).map(move |q| (s, q)))
        .collect();
    assert_eq!(keys, expected);

    // The log tail of the whole table: each piece read backwards.
    let rows = client
        .query(
            "SELECT site, seq FROM readings ORDER BY site DESC, seq DESC LIMIT 3",
            &[],
        )
        .await
        .unwrap();
    let tail: Vec<(i32, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(tail, vec![(399, 99), (399, 98), (399, 97)]);

    // A PartitionKey range wide enough is cut too; a narrow one is not.
    let wide = "SELECT count(*) FROM readings WHERE site >= 10";
    assert!(plan(&client, wide).await.contains("splits=2"));
    let count: i64 = client.query_one(wide, &[]).await.unwrap().get(0);
    assert_eq!(count, (PARTITIONS - 10) * ROWS_PER_PARTITION);
    let narrow = "SELECT count(*) FROM readings WHERE site BETWEEN 390 AND 395";
    assert!(!plan(&client, narrow).await.contains("splits="));
    let count: i64 = client.query_one(narrow, &[]).await.unwrap().get(0);
    assert_eq!(count, 6 * ROWS_PER_PARTITION);

    // A non-key filter over the pieces.
    let count: i64 = client
        .query_one("SELECT count(*) FROM readings WHERE seq = 7", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, PARTITIONS);

    // A bare LIMIT reads one piece, a few entities.
    assert!(!plan(&client, "SELECT * FROM readings LIMIT 5")
        .await
        .contains("splits="));
    assert_eq!(
        client
            .query("SELECT * FROM readings LIMIT 5", &[])
            .await
            .unwrap()
            .len(),
        5
    );
}
