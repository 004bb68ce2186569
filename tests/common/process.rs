//! `tablegate serve` as a process of its own, for the tests that kill it
//! or run several; killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct ServeProcess {
    pub child: Child,
    pub port: u16,
}

/// Starts `tablegate serve --port 0` with more `args` and `env`, and waits
/// until it listens; every line it logs after that goes to `log`.
pub fn serve(
    args: &[&std::ffi::OsStr],
    env: &[(&str, String)],
    log: impl Fn(&str) + Send + 'static,
) -> ServeProcess {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tablegate"))
        .args(["serve", "--port", "0"])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tablegate");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("tablegate exited before it listened")
            .expect("read");
        if let Some(rest) = line.split("listening on ").nth(1) {
            let address = rest.split_whitespace().next().unwrap_or_default();
            break address
                .rsplit(':')
                .next()
                .unwrap_or_default()
                .parse()
                .expect("port");
        }
    };
    // Reading on also keeps the server from blocking on a full pipe.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| log(&l)));
    ServeProcess { child, port }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
