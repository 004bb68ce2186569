//! The design guide's employee table on the native store: a point query, a
//! range query, a partition scan and a table scan.
//!
//! `cargo run --example employees`

use std::ops::Bound;

use tablegate::model::{Entity, EntityKey, Value};
use tablegate::store::native::NativeStore;
use tablegate::store::{
    query_all, EntityRead, EntityWrite, Query, Statistics, TableAdmin, WriteOp,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = NativeStore::open(dir.path())?;
    store.create_table("Employees").await?;

    // PartitionKey = department, RowKey = employee id.
    for (dept, first) in [("Sales", 0), ("Marketing", 100)] {
        let ops = (first..first + 20)
            .map(|id| {
                WriteOp::Insert(
                    Entity::new(dept, format!("{id:06}"))
                        .with("FirstName", Value::String(format!("Name{id}")))
                        .with("Age", Value::Int32(20 + id % 40)),
                )
            })
            .collect();
        store.write_batch("Employees", ops).await?; // one entity group transaction
    }

    let point = store
        .get("Employees", &EntityKey::new("Sales", "000007"), None)
        .await?;
    println!("point query: {:?}", point.map(|e| e.properties));

    let range = Query::rows(
        "Sales",
        Bound::Included("000010".into()),
        Bound::Excluded("000013".into()),
    );
    let rows = query_all(&store, "Employees", &range).await?;
    println!(
        "range query: {:?}",
        rows.iter().map(|e| e.row_key()).collect::<Vec<_>>()
    );

    let partition = query_all(&store, "Employees", &Query::partition("Marketing")).await?;
    println!("partition scan: {} employees in Marketing", partition.len());

    let all = query_all(&store, "Employees", &Query::table().project(["Age"])).await?;
    println!("table scan: {} employees", all.len());

    println!("statistics: {:?}", store.table_stats("Employees").await?);
    Ok(())
}
