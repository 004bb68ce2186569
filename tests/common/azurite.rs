//! The Azurite emulator's table service, started for a test on a free port
//! over an empty location, and killed when dropped.
//!
//! The emulator comes from npm (package `azurite`, pinned below) into
//! `.tools/azurite` of the repository; `scripts/test` installs it, and the
//! first test that needs it installs it when it is missing.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PACKAGE: &str = "azurite@3.35.0";
/// The emulator's well-known account key.
const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

pub struct Azurite {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

/// Installs the emulator once per test process.
static INSTALL: Mutex<()> = Mutex::new(());

fn executable() -> PathBuf {
    if let Ok(path) = std::env::var("TABLEGATE_AZURITE") {
        return PathBuf::from(path);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/azurite");
    let bin = root.join("node_modules/.bin/azurite-table");
    let _installing = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if !bin.exists() {
        std::fs::create_dir_all(&root).expect("make .tools/azurite");
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .arg(PACKAGE)
            .status()
            .expect("npm runs (Node.js and npm are needed for the Azure backend's tests)");
        assert!(status.success(), "npm install {PACKAGE} failed");
    }
    bin
}

impl Azurite {
    pub fn start() -> Azurite {
        let bin = executable();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new(bin)
            .args(["--tablePort", &port.to_string(), "--location"])
            .arg(dir.path())
            .args(["--silent", "--skipApiVersionCheck", "--disableTelemetry"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start azurite-table");
        let azurite = Azurite {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "azurite did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        azurite
    }

    /// The connection string of the emulator's account.
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;\
             AccountKey={};TableEndpoint=http://127.0.0.1:{}/devstoreaccount1;",
            KEY, self.port
        )
    }
}

/// A `tablegate serve --backend azure` process over the emulator's
/// account, killed when dropped.
pub type Gateway = super::process::ServeProcess;

impl Azurite {
    /// Starts a gateway on a free port and waits until it listens; every
    /// line it logs goes to `log`.
    pub fn start_gateway(&self, log: impl Fn(&str) + Send + 'static) -> Gateway {
        super::process::serve(
            &["--backend".as_ref(), "azure".as_ref()],
            &[("AZURE_STORAGE_CONNECTION_STRING", self.connection_string())],
            log,
        )
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
