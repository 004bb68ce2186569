//! Hostile bytes on the wire: random, truncated and oversized frames, before
//! and after startup. Each connection must end with an error or a close
//! (never a hang), nothing may panic (neither tablegate nor pgwire, whose
//! decoder the frame checks protect), and other sessions carry on.
//!
//! Cases: `HOSTILE_WIRE_CASES` (default 300), seed `HOSTILE_WIRE_SEED`.

use crate::common;

use std::time::Duration;

use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The protocol 3.0 startup message of user `test`.
fn startup() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196_608u32.to_be_bytes());
    for s in ["user", "test", "database", "tablegate"] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

/// Reads until the server's first ReadyForQuery ('Z' with length 5).
async fn until_ready(socket: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(5).any(|w| w == [b'Z', 0, 0, 0, 5]) {
        let n = socket.read(&mut buf).await.expect("startup reply");
        assert!(n > 0, "closed during startup");
        seen.extend_from_slice(&buf[..n]);
    }
}

/// A frame meant to break something: a message type (known or not), a
/// length that may lie (too short, too long, negative, huge), and a body
/// of random bytes, maybe cut short.
fn hostile_frame(rng: &mut StdRng) -> Vec<u8> {
    const TYPES: &[u8] = b"QPBEDSCHFdcfpX\0\xff";
    let mut frame = vec![TYPES[rng.random_range(0..TYPES.len())]];
    let body_len = rng.random_range(0..64usize);
    let length: u32 = match rng.random_range(0..6) {
        0 => (body_len + 4) as u32,
        1 => rng.random_range(0..4),
        2 => u32::MAX,
        3 => 0x7fff_ffff,
        4 => 0x3fff_fffe,
        _ => rng.random(),
    };
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend((0..body_len).map(|_| rng.random::<u8>()));
    if rng.random_bool(0.3) {
        // Text a parser may get further with.
        frame.extend_from_slice(b"SELECT 1; \0");
    }
    frame
}

/// Sends `bytes` (after a valid startup when `started`), closes the write
/// side and reads until the server closes; what the server sent after the
/// startup. Fails if the server neither closes nor errors within the time.
async fn send_hostile(port: u16, started: bool, bytes: &[u8]) -> Vec<u8> {
    let mut socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    if started {
        socket.write_all(&startup()).await.unwrap();
        until_ready(&mut socket).await;
    }
    // The server may close as soon as it reads something it refuses.
    let _ = socket.write_all(bytes).await;
    let _ = socket.shutdown().await;
    let mut sink = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut sink)).await;
    assert!(
        read.is_ok(),
        "the server neither answered nor closed after {bytes:?}"
    );
    sink
}

/// Whether `reply` holds a FATAL protocol violation (SQLSTATE 08P01).
fn protocol_violation(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    text.contains("SFATAL") && text.contains("C08P01")
}

#[tokio::test]
async fn a_bad_frame_gets_fatal_08p01_naming_it() {
    let server = TestServer::start().await;
    let reply = send_hostile(server.port, true, b"Q\0\0\0\x02").await;
    assert!(protocol_violation(&reply), "{reply:?}");
    assert!(String::from_utf8_lossy(&reply)
        .contains("invalid message length 2 for a message of type 'Q'"));

    // The frames before a bad one are served.
    let mut bytes = b"Q\0\0\0\x0eSELECT 42\0".to_vec();
    bytes.extend_from_slice(b"B\0\0\0\x0a\0\0\x00\x00\x00\x05");
    let reply = send_hostile(server.port, true, &bytes).await;
    let text = String::from_utf8_lossy(&reply);
    assert!(text.contains("42"), "{text:?}");
    assert!(text.contains("malformed message of type 'B'"), "{text:?}");

    let reply = send_hostile(server.port, false, &3u32.to_be_bytes()).await;
    assert!(String::from_utf8_lossy(&reply).contains("invalid length of startup packet"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_end_their_connection_only() {
    let panics = common::PanicCounter::install();
    let cases: usize = common::env_number("HOSTILE_WIRE_CASES", 300);
    let seed: u64 = common::env_number("HOSTILE_WIRE_SEED", 7);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut refused = 0;

    let server = TestServer::start().await;
    // A session that lives through all of it.
    let bystander = server.client().await;
    bystander
        .batch_execute(
            "CREATE TABLE kept (k int PRIMARY KEY, v text); INSERT INTO kept VALUES (1, 'one')",
        )
        .await
        .unwrap();

    for case in 0..cases {
        let started = rng.random_bool(0.7);
        let mut bytes = Vec::new();
        if !started && rng.random_bool(0.5) {
            // A startup message with a lying length or random parameters.
            let mut s = startup();
            let cut = rng.random_range(0..s.len());
            s.truncate(cut);
            bytes.extend(s);
        }
        for _ in 0..rng.random_range(1..4) {
            bytes.extend(hostile_frame(&mut rng));
        }
        let reply = send_hostile(server.port, started, &bytes).await;
        refused += usize::from(protocol_violation(&reply));
        if case % 50 == 0 {
            let row = bystander
                .query_one("SELECT v FROM kept WHERE k = 1", &[])
                .await
                .unwrap();
            assert_eq!(row.get::<_, String>(0), "one");
        }
    }
    // The server still takes new connections and answers them.
    let fresh = server.client().await;
    let row = fresh
        .query_one("SELECT count(*) FROM kept", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(panics.own(), 0, "tablegate's code panicked");
    assert_eq!(panics.dependencies(), 0, "a dependency panicked");
    assert!(refused > cases / 4, "only {refused} of {cases} got 08P01");
    eprintln!(
        "{cases} hostile connections (seed {seed}): no hang, no panic; \
         {refused} refused with FATAL 08P01"
    );
}

/// A password-family frame around `body`.
fn password_frame(body: &[u8]) -> Vec<u8> {
    let mut frame = vec![b'p'];
    frame.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

/// Text near a SCRAM client-first or client-final message, cut and
/// scrambled.
fn scram_text(rng: &mut StdRng) -> Vec<u8> {
    const PIECES: &[&str] = &[
        "n,,n=alice,r=",
        "y,,",
        "p=tls-server-end-point,,",
        "c=biws,r=",
        "p=",
        "n=",
        "r=",
        ",",
        "=",
        "==",
        "\u{0}",
        "é",
        "x",
    ];
    let mut text = Vec::new();
    for _ in 0..rng.random_range(0..8) {
        if rng.random_bool(0.8) {
            text.extend_from_slice(PIECES[rng.random_range(0..PIECES.len())].as_bytes());
        } else {
            text.extend((0..rng.random_range(1..30)).map(|_| rng.random::<u8>()));
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_scram_messages_end_their_login_only() {
    let panics = common::PanicCounter::install();
    let cases: usize = common::env_number("HOSTILE_WIRE_CASES", 300);
    let mut rng = StdRng::seed_from_u64(common::env_number("HOSTILE_WIRE_SEED", 7));
    let (port, _dir) = common::start_scram("test:s3cret\n", None).await;

    for _ in 0..cases {
        let mut socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        socket.write_all(&startup()).await.unwrap();
        let mut first = Vec::new();
        let mechanism: &[u8] = match rng.random_range(0..3) {
            0 => b"SCRAM-SHA-256",
            1 => b"SCRAM-SHA-256-PLUS",
            _ => b"OAUTHBEARER",
        };
        first.extend_from_slice(mechanism);
        first.push(0);
        let data = scram_text(&mut rng);
        let length = match rng.random_range(0..4) {
            0 => -1,
            1 => rng.random_range(-5..200),
            _ => data.len() as i32,
        };
        first.extend_from_slice(&length.to_be_bytes());
        first.extend(data);
        let mut bytes = password_frame(&first);
        for _ in 0..rng.random_range(0..3) {
            bytes.extend(password_frame(&scram_text(&mut rng)));
        }
        let _ = socket.write_all(&bytes).await;
        let _ = socket.shutdown().await;
        let mut sink = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut sink)).await;
        assert!(read.is_ok(), "no answer nor close after {bytes:?}");
    }

    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=test password=s3cret"),
        tokio_postgres::NoTls,
    )
    .await
    .expect("a good login still works");
    tokio::spawn(connection);
    assert_eq!(
        client
            .query_one("SELECT 1", &[])
            .await
            .unwrap()
            .get::<_, i32>(0),
        1
    );
    assert_eq!(panics.own(), 0, "tablegate's code panicked");
    assert_eq!(panics.dependencies(), 0, "a dependency panicked");
}
