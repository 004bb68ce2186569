//! A random write workload over tables with indexes and materialized views
//! of every maintained shape, and the checks that they match their tables.

use rand::rngs::StdRng;
use rand::Rng;

/// The tables, indexes and views the workload writes and checks.
pub const SCHEMA: &str = "
    CREATE TABLE groups (grp int PRIMARY KEY, label text, active bool);
    CREATE TABLE items (part int, id int, code text, grp int NOT NULL, PRIMARY KEY (part, id));
    CREATE UNIQUE INDEX items_code ON items (code);
    CREATE INDEX items_grp ON items (grp);
    CREATE INDEX items_grp_in_part ON items (grp) WITH (intra_partition = true);
    CREATE MATERIALIZED VIEW coded_items_by_group WITH (partition_key = 'grp', row_key = 'part, id') AS
        SELECT grp, part, id, code FROM items WHERE code IS NOT NULL;
    CREATE MATERIALIZED VIEW items_labeled AS
        SELECT i.part, i.id, g.label, i.code FROM items i JOIN groups g ON i.grp = g.grp WHERE g.active;
    CREATE MATERIALIZED VIEW items_labeled_all AS
        SELECT i.part, i.id, g.label FROM items i LEFT JOIN groups g ON i.grp = g.grp;
    CREATE MATERIALIZED VIEW group_sizes AS
        SELECT grp, count(*) AS n, count(code) AS coded, sum(id) AS ids, min(id) AS low,
               max(id) AS high, avg(id) AS mean
        FROM items WHERE part < 3 GROUP BY grp";

/// What `VERIFY` checks after a workload.
pub const INDEXES: [&str; 3] = ["items_code", "items_grp", "items_grp_in_part"];
pub const VIEWS: [&str; 4] = [
    "coded_items_by_group",
    "items_labeled",
    "items_labeled_all",
    "group_sizes",
];

/// A value for the unique column: few, so that collisions are frequent.
fn code(rng: &mut StdRng) -> String {
    if rng.random_ratio(1, 8) {
        "NULL".into()
    } else {
        format!("'c{}#{}'", rng.random_range(0..40), rng.random_range(0..2))
    }
}

/// One random write statement.
pub fn statement(rng: &mut StdRng) -> String {
    let part = rng.random_range(0..4);
    let id = rng.random_range(0..30);
    let group = rng.random_range(0..6);
    match rng.random_range(0..13) {
        0..=2 => format!(
            "INSERT INTO items VALUES ({part}, {id}, {}, {group})",
            code(rng)
        ),
        3 => format!(
            "INSERT INTO items VALUES ({part}, {id}, {}, {group}), ({part}, {}, {}, {group})",
            code(rng),
            id + 1,
            code(rng)
        ),
        4 => format!(
            "UPDATE items SET code = {} WHERE part = {part} AND id = {id}",
            code(rng)
        ),
        5 => format!("UPDATE items SET grp = grp + 1 WHERE grp = {group}"),
        6 => format!("UPDATE items SET id = id + 100 WHERE part = {part} AND id = {id}"),
        7 => format!("DELETE FROM items WHERE grp = {group} AND id < {id}"),
        8 => format!(
            "INSERT INTO items VALUES ({part}, {id}, {}, {group}) \
             ON CONFLICT (part, id) DO UPDATE SET code = excluded.code, grp = excluded.grp",
            code(rng)
        ),
        9 => format!("UPDATE items SET code = {} WHERE grp = {group}", code(rng)),
        10 => format!(
            "INSERT INTO groups VALUES ({group}, 'g{}', {}) \
             ON CONFLICT (grp) DO UPDATE SET label = excluded.label, active = excluded.active",
            rng.random_range(0..100),
            rng.random_bool(0.7)
        ),
        11 => format!("UPDATE groups SET active = NOT active WHERE grp = {group}"),
        _ => format!("DELETE FROM groups WHERE grp = {group}"),
    }
}

/// Every difference `VERIFY INDEX` and `VERIFY MATERIALIZED VIEW` find, as
/// text (empty when every index and view matches its tables).
pub async fn differences(client: &tokio_postgres::Client) -> Vec<String> {
    let mut found = Vec::new();
    let commands = INDEXES.iter().map(|i| format!("VERIFY INDEX {i}")).chain(
        VIEWS
            .iter()
            .map(|v| format!("VERIFY MATERIALIZED VIEW {v}")),
    );
    for command in commands {
        let rows = client
            .query(&command, &[])
            .await
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        found.extend(rows.iter().map(|r| {
            format!(
                "{command}: {} {}",
                r.get::<_, String>(0),
                r.get::<_, String>(1)
            )
        }));
    }
    found
}
