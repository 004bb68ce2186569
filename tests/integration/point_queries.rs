//! Prepared point queries by the whole key skip planning; everything else
//! does not; both answer the same.

use std::sync::Arc;

use datafusion::common::{ParamValues, ScalarValue};
use futures::TryStreamExt;
use tablegate::sql::{Engine, Output, Session};
use tablegate::store::native::NativeStore;

async fn rows(output: Output) -> usize {
    match output {
        Output::Rows { stream, .. } => stream
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum(),
        _ => panic!("not rows"),
    }
}

#[tokio::test]
async fn point_queries_skip_planning() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(Arc::new(NativeStore::open(dir.path()).unwrap()))
        .await
        .unwrap();
    let mut session = Session::new(engine);
    for output in session
        .execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance bigint); INSERT INTO accounts VALUES (1, 'a', 10), (2, 'b', 20)")
        .await
    {
        output.unwrap();
    }
    let cases = [
        ("SELECT owner, balance FROM accounts WHERE id = $1", true),
        ("SELECT * FROM accounts WHERE id = $1", true),
        ("SELECT owner FROM accounts WHERE $1 = id", true),
        ("SELECT owner FROM accounts WHERE id = 1", true),
        ("SELECT owner FROM accounts WHERE id > $1", false),
        ("SELECT upper(owner) FROM accounts WHERE id = $1", false),
        (
            "SELECT owner FROM accounts WHERE id = $1 AND balance > 5",
            false,
        ),
    ];
    for (sql, point) in cases {
        let prepared = session.prepare(sql).await.unwrap();
        assert_eq!(prepared.is_point_query(), point, "{sql}");
        let params = if sql.contains("$1") {
            vec![ScalarValue::Int32(Some(1))]
        } else {
            vec![]
        };
        let n = rows(
            session
                .execute_prepared(&prepared, ParamValues::from(params))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(n, 1, "{sql}");
    }
    // A key that is not there, and NULL.
    let prepared = session
        .prepare("SELECT owner FROM accounts WHERE id = $1")
        .await
        .unwrap();
    for value in [ScalarValue::Int32(Some(99)), ScalarValue::Int32(None)] {
        let n = rows(
            session
                .execute_prepared(&prepared, ParamValues::from(vec![value]))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(n, 0);
    }
}
