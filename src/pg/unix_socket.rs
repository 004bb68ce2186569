//! The Unix-domain socket, named as PostgreSQL names its own:
//! `<dir>/.s.PGSQL.<port>`, so that `psql -h <dir> -p <port>` and libpq's
//! `host=<dir>` find it.
//!
//! A socket file left by a server that stopped without removing it is
//! replaced; one that a running server answers on is an error, as the TCP
//! port in use is.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// A bound socket; its file is removed when this is dropped.
pub struct UnixSocket {
    pub listener: UnixListener,
    path: PathBuf,
}

impl UnixSocket {
    pub fn bind(dir: &Path, port: u16) -> io::Result<UnixSocket> {
        let path = dir.join(format!(".s.PGSQL.{port}"));
        if path.exists() {
            match std::os::unix::net::UnixStream::connect(&path) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("another server is listening on {}", path.display()),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(&path)?;
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{} is in the way: {e}", path.display()),
                    ))
                }
            }
        }
        let listener = UnixListener::bind(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", path.display())))?;
        // Any local user may connect, as to PostgreSQL's socket by default
        // (unix_socket_permissions 0777): authentication decides who logs in.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        Ok(UnixSocket { listener, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
