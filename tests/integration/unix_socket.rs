//! The Unix-domain socket: clients that connect with `host=<dir>` (psql's
//! `-h <dir>`, libpq, tokio-postgres) reach the same server as over TCP; a
//! socket file left behind is replaced, a live one is not taken over, and
//! the file goes when the server stops.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::TestServer;

async fn connect_local(dir: &Path, port: u16) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::Config::new()
        .host_path(dir)
        .port(port)
        .user("test")
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect over the Unix socket");
    tokio::spawn(connection);
    client
}

async fn start_with_socket(sockets: &Path) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let sockets = sockets.to_owned();
    TestServer::start_configured(dir, move |server| {
        server
            .with_unix_socket(&sockets)
            .expect("bind the Unix socket")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_the_socket_and_of_tcp_share_one_server() {
    let sockets = tempfile::tempdir().expect("tempdir");
    let server = start_with_socket(sockets.path()).await;
    let path = sockets.path().join(format!(".s.PGSQL.{}", server.port));
    assert!(path.exists(), "{} was not made", path.display());

    let local = connect_local(sockets.path(), server.port).await;
    local
        .batch_execute(
            "CREATE TABLE notes (id int PRIMARY KEY, body text);
             INSERT INTO notes VALUES (1, 'written over the socket')",
        )
        .await
        .unwrap();
    let tcp = server.client().await;
    let body: String = tcp
        .query_one("SELECT body FROM notes WHERE id = $1", &[&1i32])
        .await
        .unwrap()
        .get(0);
    assert_eq!(body, "written over the socket");
    tcp.execute("INSERT INTO notes VALUES (2, 'written over TCP')", &[])
        .await
        .unwrap();
    let bodies: Vec<String> =
        common::first_column(&local, "SELECT body FROM notes ORDER BY id").await;
    assert_eq!(bodies, ["written over the socket", "written over TCP"]);

    // psql, given the directory as its host, finds the socket by the port.
    let conninfo = format!(
        "host={} port={} user=ann dbname=tablegate",
        sockets.path().display(),
        server.port
    );
    let (out, _) = common::psql(&conninfo, "SELECT count(*) FROM notes").await;
    assert_eq!(out.lines().nth(1), Some("2"), "{out}");

    // An error over the socket is the same error, and the session goes on.
    let error = local
        .execute("INSERT INTO notes VALUES (1, 'again')", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("23505"));
    assert_eq!(local.query("SELECT 1", &[]).await.unwrap().len(), 1);

    // A client asking for TLS there is told no, as PostgreSQL tells it,
    // and logs in without.
    let raw_path = path.clone();
    let (answer, reply) = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut raw = std::os::unix::net::UnixStream::connect(&raw_path).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        raw.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])
            .unwrap();
        let mut answer = [0u8; 1];
        raw.read_exact(&mut answer).unwrap();
        let body = b"\0\x03\0\0user\0test\0\0";
        let mut startup = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        startup.extend_from_slice(body);
        raw.write_all(&startup).unwrap();
        let mut reply = [0u8; 1];
        raw.read_exact(&mut reply).unwrap();
        (answer[0], reply[0])
    })
    .await
    .unwrap();
    assert_eq!(answer, b'N');
    assert_eq!(
        reply, b'R',
        "an authentication message follows the startup packet"
    );

    drop(local);
    drop(server);
    let mut waited = Duration::ZERO;
    while path.exists() && waited < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    assert!(
        !path.exists(),
        "{} is left after the server stopped",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_left_socket_file_is_replaced_and_a_live_one_is_kept() {
    let sockets = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(
        tablegate::store::native::NativeStore::open(data.path()).expect("open store"),
    );
    let engine = tablegate::sql::Engine::open(store).await.expect("engine");
    let server = tablegate::pg::Server::bind("127.0.0.1:0", engine.clone())
        .await
        .expect("bind");
    let port = server.local_addr().unwrap().port();
    let path = sockets.path().join(format!(".s.PGSQL.{port}"));

    // A live socket at the path: another server's. It is not taken over.
    let live = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let error = match server.with_unix_socket(sockets.path()) {
        Ok(_) => panic!("took over a live socket"),
        Err(e) => e,
    };
    assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
    assert!(error.to_string().contains(".s.PGSQL."), "{error}");

    drop(live);
    let server = tablegate::pg::Server::bind("127.0.0.1:0", engine)
        .await
        .expect("bind");
    let port = server.local_addr().unwrap().port();
    let path = sockets.path().join(format!(".s.PGSQL.{port}"));
    // A file nobody listens on, as a stopped server leaves it: replaced.
    // (The new server may have been given the first one's port, whose
    // path the live socket above left behind.)
    let _ = std::fs::remove_file(&path);
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let server = server
        .with_unix_socket(sockets.path())
        .expect("a left socket file is replaced");
    assert_eq!(server.unix_socket_path(), Some(path.as_path()));
    tokio::spawn(server.run(std::future::pending()));
    let client = connect_local(sockets.path(), port).await;
    let answer: String = client
        .query_one("SELECT 'over the socket'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(answer, "over the socket");
}
