//! Limits a server keeps under load: past its connection limit a client
//! gets SQLSTATE 53300 while the open connections carry on.

mod common;

use common::TestServer;
use tokio_postgres::error::SqlState;

async fn connect(port: u16) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=test"),
        tokio_postgres::NoTls,
    )
    .await?;
    tokio::spawn(connection);
    Ok(client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_get_53300() {
    let server =
        TestServer::start_configured(tempfile::tempdir().unwrap(), |s| s.with_max_connections(3))
            .await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(connect(server.port).await.expect("within the limit"));
    }
    for _ in 0..5 {
        let refused = connect(server.port).await.err().expect("past the limit");
        assert_eq!(
            refused.code(),
            Some(&SqlState::TOO_MANY_CONNECTIONS),
            "{refused}"
        );
        let error = refused.as_db_error().expect("a server error");
        assert_eq!(error.severity(), "FATAL");
        assert_eq!(error.message(), "sorry, too many clients already");
    }
    // The open connections work, and a closed one frees its place.
    for client in &open {
        let row = client.query_one("SELECT 1 + 1", &[]).await.unwrap();
        assert_eq!(row.get::<_, i64>(0), 2);
    }
    drop(open.pop());
    let mut again = None;
    for _ in 0..50 {
        if let Ok(client) = connect(server.port).await {
            again = Some(client);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let again = again.expect("a place once a connection closed");
    again.batch_execute("SELECT 1").await.unwrap();
}
