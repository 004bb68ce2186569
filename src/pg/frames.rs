//! Frame checks ahead of pgwire's decoder.
//!
//! pgwire decodes a frame's body from the connection's whole read buffer,
//! not from the frame alone, and trusts the lengths and counts it finds:
//! a length field below 4, a count larger than the body or a string
//! without its NUL makes it panic or read into the next frame. So every
//! byte a client sends passes through [`Checked`] first, which hands pgwire
//! only whole frames whose structure it has verified: lengths in range,
//! counts and strings inside their frame, nothing left over. The first bad
//! frame ends the connection with FATAL 08P01 naming what was wrong, as
//! PostgreSQL does; the frames before it are still served.
//!
//! CopyData bodies are opaque: they stream through as they arrive, so a
//! COPY is never held whole here.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::io::poll_read_buf;

/// PostgreSQL's limit on a startup packet.
const MAX_STARTUP_LENGTH: usize = 10_000;
/// PostgreSQL's limit on Query, Parse, Bind and CopyData messages (1 GiB).
const MAX_LARGE_LENGTH: usize = 0x3fff_ffff;
/// PostgreSQL's limit on an authentication token.
const MAX_PASSWORD_LENGTH: usize = 65_535;
/// PostgreSQL's limit on the other messages.
const MAX_SMALL_LENGTH: usize = 10_000;

pub(super) const SSL_REQUEST: u32 = 80_877_103;
pub(super) const GSS_ENC_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;
/// A cancel request's code, process id and a secret key of up to 256 bytes.
const CANCEL_LENGTHS: std::ops::RangeInclusive<usize> = 16..=12 + 256;

/// What was wrong with a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    StartupLength(usize),
    StartupPacket,
    Type(u8),
    Length { kind: u8, length: usize },
    Malformed { kind: u8, what: &'static str },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::StartupLength(length) => write!(
                f,
                "invalid length of startup packet: {length} bytes \
                 (8 to {MAX_STARTUP_LENGTH} allowed)"
            ),
            FrameError::StartupPacket => {
                f.write_str("invalid startup packet: not a startup, SSL, GSS or cancel request")
            }
            FrameError::Type(kind) => write!(f, "invalid frontend message type {kind}"),
            FrameError::Length { kind, length } => write!(
                f,
                "invalid message length {length} for a message of type {}",
                Kind(*kind)
            ),
            FrameError::Malformed { kind, what } => {
                write!(f, "malformed message of type {}: {what}", Kind(*kind))
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// The frame error a read of [`Checked`] returned, if that is what `error` is.
pub fn frame_error(error: &io::Error) -> Option<&FrameError> {
    error.get_ref()?.downcast_ref::<FrameError>()
}

/// A message type byte as PostgreSQL names it: the letter, or its number.
struct Kind(u8);

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", self.0 as char)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The frame structure a connection has reached.
#[derive(Debug)]
pub struct FrameCheck {
    /// Untyped frames (SSL, GSS and cancel requests, startup) until the
    /// startup message; typed messages after it.
    started: bool,
    /// The first password message of a SCRAM login is a
    /// SASLInitialResponse, which pgwire parses field by field.
    sasl_initial: bool,
    /// Bytes of a CopyData body still to pass.
    copy_left: usize,
}

impl FrameCheck {
    /// `scram`: logins exchange SASL messages.
    pub fn new(scram: bool) -> FrameCheck {
        FrameCheck {
            started: false,
            sasl_initial: scram,
            copy_left: 0,
        }
    }

    /// How many bytes at the start of `bytes` are checked and may pass,
    /// and the error of the frame that follows them, if it is bad. An
    /// incomplete frame at the end waits for more bytes.
    pub fn check(&mut self, bytes: &[u8]) -> (usize, Option<FrameError>) {
        let mut at = 0;
        loop {
            if self.copy_left > 0 {
                let n = self.copy_left.min(bytes.len() - at);
                at += n;
                self.copy_left -= n;
                if self.copy_left > 0 {
                    return (at, None);
                }
            }
            match self.frame(&bytes[at..]) {
                Ok(Some(n)) => at += n,
                Ok(None) => return (at, None),
                Err(e) => return (at, Some(e)),
            }
        }
    }

    /// The length of the frame at the start of `bytes` once it is whole
    /// and valid (for CopyData, of its header only).
    fn frame(&mut self, bytes: &[u8]) -> Result<Option<usize>, FrameError> {
        if !self.started {
            return self.untyped(bytes);
        }
        let Some(header) = bytes.get(..5) else {
            return Ok(None);
        };
        let kind = header[0];
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let (min, max) = match kind {
            b'Q' | b'P' | b'B' | b'd' => (4, MAX_LARGE_LENGTH),
            b'p' => (4, MAX_PASSWORD_LENGTH),
            b'C' | b'D' | b'E' | b'f' => (4, MAX_SMALL_LENGTH),
            b'H' | b'S' | b'c' | b'X' => (4, 4),
            _ => return Err(FrameError::Type(kind)),
        };
        if !(min..=max).contains(&length) {
            return Err(FrameError::Length { kind, length });
        }
        if kind == b'd' {
            self.copy_left = length - 4;
            return Ok(Some(5));
        }
        let Some(body) = bytes.get(5..1 + length) else {
            return Ok(None);
        };
        self.body(kind, Body(body))
            .map_err(|what| FrameError::Malformed { kind, what })?;
        Ok(Some(1 + length))
    }

    /// SSL and GSS encryption requests, a cancel request, or the startup
    /// message (protocol version, then name and value strings ended by an
    /// empty name).
    fn untyped(&mut self, bytes: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(field) = bytes.get(..4) else {
            return Ok(None);
        };
        let length = u32::from_be_bytes([field[0], field[1], field[2], field[3]]) as usize;
        if !(8..=MAX_STARTUP_LENGTH).contains(&length) {
            return Err(FrameError::StartupLength(length));
        }
        let Some(frame) = bytes.get(..length) else {
            return Ok(None);
        };
        let code = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let valid = match code {
            SSL_REQUEST | GSS_ENC_REQUEST => length == 8,
            CANCEL_REQUEST => CANCEL_LENGTHS.contains(&length),
            _ => {
                self.started = true;
                startup_parameters(Body(&frame[8..])).is_ok()
            }
        };
        if !valid {
            return Err(FrameError::StartupPacket);
        }
        Ok(Some(length))
    }

    /// The structure of a typed message's body, as pgwire reads it.
    fn body(&mut self, kind: u8, mut body: Body) -> Result<(), &'static str> {
        match kind {
            b'Q' | b'f' => {
                body.cstring()?;
            }
            b'P' => {
                body.cstring()?;
                body.cstring()?;
                let types = body.u16()?;
                body.take(4 * types)?;
            }
            b'B' => {
                body.cstring()?;
                body.cstring()?;
                let formats = body.u16()?;
                body.take(2 * formats)?;
                for _ in 0..body.u16()? {
                    match body.i32()? {
                        -1 => {}
                        n if n < 0 => return Err("a parameter's length is negative"),
                        n => body.take(n as usize)?,
                    }
                }
                let formats = body.u16()?;
                body.take(2 * formats)?;
            }
            b'C' | b'D' => {
                body.take(1)?;
                body.cstring()?;
            }
            b'E' => {
                body.cstring()?;
                body.take(4)?;
            }
            b'p' if self.sasl_initial => {
                self.sasl_initial = false;
                body.cstring()?;
                match body.i32()? {
                    -1 => {}
                    n if n < 0 => return Err("the SASL response's length is negative"),
                    n => body.take(n as usize)?,
                }
            }
            // A cleartext password or a SASL response: pgwire keeps the
            // body whole.
            b'p' => return Ok(()),
            _ => {}
        }
        body.end()
    }
}

fn startup_parameters(mut body: Body) -> Result<(), &'static str> {
    loop {
        if body.cstring()? == 0 {
            return body.end();
        }
        body.cstring()?;
    }
}

/// A frame's body, read from the front.
struct Body<'a>(&'a [u8]);

impl Body<'_> {
    fn take(&mut self, n: usize) -> Result<(), &'static str> {
        if n > self.0.len() {
            return Err("its content runs past its length");
        }
        self.0 = &self.0[n..];
        Ok(())
    }

    /// Skips a NUL-terminated string; its length without the NUL.
    fn cstring(&mut self) -> Result<usize, &'static str> {
        let end = self
            .0
            .iter()
            .position(|&b| b == 0)
            .ok_or("a string is not terminated")?;
        self.0 = &self.0[end + 1..];
        Ok(end)
    }

    fn u16(&mut self) -> Result<usize, &'static str> {
        let bytes = self.0.get(..2).ok_or("its content runs past its length")?;
        let n = u16::from_be_bytes([bytes[0], bytes[1]]);
        self.0 = &self.0[2..];
        Ok(n as usize)
    }

    fn i32(&mut self) -> Result<i32, &'static str> {
        let bytes = self.0.get(..4).ok_or("its content runs past its length")?;
        let n = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        self.0 = &self.0[4..];
        Ok(n)
    }

    fn end(self) -> Result<(), &'static str> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err("bytes are left after its content")
        }
    }
}

/// A connection's byte stream, read through a [`FrameCheck`]: reads return
/// only checked bytes, then the error of a bad frame (as
/// `io::ErrorKind::InvalidData` wrapping a [`FrameError`]). Writes pass
/// straight through.
pub struct Checked<IO> {
    io: IO,
    check: FrameCheck,
    /// Bytes read and not yet handed on: `passable` checked ones first.
    held: BytesMut,
    passable: usize,
    failed: Option<FrameError>,
    /// A bad frame was reported: nothing more is read.
    ended: bool,
}

impl<IO> Checked<IO> {
    /// `read` holds bytes already read from `io`.
    pub fn new(io: IO, mut check: FrameCheck, read: BytesMut) -> Checked<IO> {
        let (passable, failed) = check.check(&read);
        Checked {
            io,
            check,
            held: read,
            passable,
            failed,
            ended: false,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Checked<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.passable > 0 {
                let n = this.passable.min(out.remaining());
                out.put_slice(&this.held[..n]);
                this.held.advance(n);
                this.passable -= n;
                return Poll::Ready(Ok(()));
            }
            if let Some(error) = this.failed.take() {
                this.held.clear();
                this.ended = true;
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, error)));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            this.held.reserve(8 * 1024);
            if ready!(poll_read_buf(Pin::new(&mut this.io), cx, &mut this.held))? == 0 {
                // End of stream; an incomplete frame is dropped with it.
                return Poll::Ready(Ok(()));
            }
            let (passable, failed) = this.check.check(&this.held);
            this.passable = passable;
            this.failed = failed;
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Checked<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;
    use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn cstring(out: &mut Vec<u8>, s: &[u8]) {
        out.extend_from_slice(s);
        out.push(0);
    }

    fn startup() -> Vec<u8> {
        let mut body = 196_608u32.to_be_bytes().to_vec();
        for s in [&b"user"[..], b"u", b"database", b"d", b""] {
            cstring(&mut body, s);
        }
        let mut out = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        out.extend(body);
        out
    }

    fn text(rng: &mut StdRng) -> Vec<u8> {
        (0..rng.random_range(0..12))
            .map(|_| rng.random_range(1..=255u8))
            .collect()
    }

    /// A well-formed frontend message of a random type.
    fn message(rng: &mut StdRng) -> Vec<u8> {
        let mut body = Vec::new();
        let kind = match rng.random_range(0..11) {
            0 => {
                cstring(&mut body, &text(rng));
                b'Q'
            }
            1 => {
                cstring(&mut body, &text(rng));
                cstring(&mut body, &text(rng));
                let n = rng.random_range(0..4u16);
                body.put_u16(n);
                (0..n).for_each(|_| body.put_u32(rng.random()));
                b'P'
            }
            2 => {
                cstring(&mut body, &text(rng));
                cstring(&mut body, &text(rng));
                let n = rng.random_range(0..3u16);
                body.put_u16(n);
                (0..n).for_each(|_| body.put_i16(rng.random_range(0..2)));
                let n = rng.random_range(0..4u16);
                body.put_u16(n);
                for _ in 0..n {
                    if rng.random_bool(0.2) {
                        body.put_i32(-1);
                    } else {
                        let value = text(rng);
                        body.put_i32(value.len() as i32);
                        body.extend(value);
                    }
                }
                let n = rng.random_range(0..3u16);
                body.put_u16(n);
                (0..n).for_each(|_| body.put_i16(rng.random_range(0..2)));
                b'B'
            }
            3 | 4 => {
                body.push(if rng.random_bool(0.5) { b'S' } else { b'P' });
                cstring(&mut body, &text(rng));
                if rng.random_bool(0.5) {
                    b'D'
                } else {
                    b'C'
                }
            }
            5 => {
                cstring(&mut body, &text(rng));
                body.put_i32(rng.random_range(0..100));
                b'E'
            }
            6 => {
                body = text(rng);
                b'd'
            }
            7 => {
                cstring(&mut body, &text(rng));
                b'f'
            }
            8 => b'S',
            9 => b'H',
            _ => b'c',
        };
        frame(kind, &body)
    }

    /// `frame` broken in one of the ways a hostile client would.
    fn mutate(rng: &mut StdRng, frame: &mut Vec<u8>) {
        match rng.random_range(0..6) {
            0 => {
                let length: u32 = match rng.random_range(0..4) {
                    0 => rng.random_range(0..8),
                    1 => u32::MAX - rng.random_range(0..4),
                    2 => frame.len() as u32 - 1 + rng.random_range(0..3) - 1,
                    _ => rng.random(),
                };
                frame[1..5].copy_from_slice(&length.to_be_bytes());
            }
            1 => {
                let at = rng.random_range(0..frame.len());
                frame[at] = rng.random();
            }
            2 => {
                let at = rng.random_range(5..=frame.len());
                frame.insert(at, rng.random());
                let length = frame.len() as u32 - 1;
                frame[1..5].copy_from_slice(&length.to_be_bytes());
            }
            3 if frame.len() > 5 => {
                frame.truncate(rng.random_range(5..frame.len()));
                let length = frame.len() as u32 - 1;
                frame[1..5].copy_from_slice(&length.to_be_bytes());
            }
            _ => frame[0] = rng.random(),
        }
    }

    /// Decodes `bytes` as pgwire does on a connection; the number of bytes
    /// consumed by whole messages.
    fn decode_all(bytes: &[u8], scram: bool) -> usize {
        let mut buf = BytesMut::from(bytes);
        let mut context = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
        context.awaiting_frontend_ssl = false;
        let mut sasl_initial = scram;
        loop {
            let before = buf.len();
            match PgWireFrontendMessage::decode(&mut buf, &context) {
                Ok(Some(PgWireFrontendMessage::PasswordMessageFamily(p))) => {
                    let parsed = if std::mem::take(&mut sasl_initial) {
                        p.into_sasl_initial_response().map(drop)
                    } else {
                        p.into_sasl_response().map(drop)
                    };
                    assert!(parsed.is_ok(), "a checked password message fails");
                }
                Ok(Some(_)) => {}
                Ok(None) => return bytes.len() - before,
                Err(e) => panic!("a checked frame fails to decode: {e}"),
            }
            context.awaiting_frontend_startup = false;
        }
    }

    #[test]
    fn checked_frames_decode_whole_in_pgwire() {
        let mut rng = StdRng::seed_from_u64(3);
        let (mut refused, mut cases) = (0, 0);
        for _ in 0..3_000 {
            let scram = rng.random_bool(0.3);
            let mut messages = vec![startup()];
            if scram {
                let mut body = Vec::new();
                cstring(&mut body, b"SCRAM-SHA-256");
                let data = text(&mut rng);
                body.put_i32(data.len() as i32);
                body.extend(data);
                messages.push(frame(b'p', &body));
                messages.push(frame(b'p', &text(&mut rng)));
            }
            messages.extend((0..rng.random_range(1..6)).map(|_| message(&mut rng)));
            let intact: Vec<u8> = messages.concat();
            assert_eq!(FrameCheck::new(scram).check(&intact), (intact.len(), None));

            let broken = rng.random_range(1..messages.len());
            mutate(&mut rng, &mut messages[broken]);
            let bytes: Vec<u8> = messages.concat();
            let (passable, error) = FrameCheck::new(scram).check(&bytes);
            cases += 1;
            refused += usize::from(error.is_some());

            // What passes decodes whole, without a panic and without
            // reading into what did not pass.
            let decoded = decode_all(&bytes[..passable], scram);
            let rest = &bytes[decoded..passable];
            assert!(
                rest.is_empty() || rest[0] == b'd',
                "pgwire stopped {} bytes short of a checked boundary",
                rest.len()
            );

            // Bytes arriving in pieces pass the same way.
            let mut check = FrameCheck::new(scram);
            let (mut held, mut passed, mut failed) = (Vec::new(), 0, None);
            for piece in bytes.chunks(rng.random_range(1..40)) {
                held.extend_from_slice(piece);
                let (n, error) = check.check(&held);
                held.drain(..n);
                passed += n;
                if error.is_some() {
                    failed = error;
                    break;
                }
            }
            assert_eq!((passed, failed), (passable, error));
        }
        assert!(refused > cases / 2, "only {refused} of {cases} refused");
    }

    #[test]
    fn bad_frames_are_named() {
        let mut check = FrameCheck::new(false);
        let start = startup();
        assert_eq!(check.check(&start), (start.len(), None));
        let cases: [(&[u8], &str); 7] = [
            (
                b"Q\0\0\0\x02",
                "invalid message length 2 for a message of type 'Q'",
            ),
            (
                b"S\0\0\0\x05\0",
                "invalid message length 5 for a message of type 'S'",
            ),
            (b"\xff\0\0\0\x04", "invalid frontend message type 255"),
            (
                b"Q\0\0\0\x07abc",
                "malformed message of type 'Q': a string is not terminated",
            ),
            (
                b"Q\0\0\0\x07a\0c",
                "malformed message of type 'Q': bytes are left after its content",
            ),
            (
                b"E\0\0\0\x07p\0\0",
                "malformed message of type 'E': its content runs past its length",
            ),
            (
                b"d\x7f\xff\xff\xff",
                "invalid message length 2147483647 for a message of type 'd'",
            ),
        ];
        for (bytes, message) in cases {
            let mut check = FrameCheck::new(false);
            check.started = true;
            let (passable, error) = check.check(bytes);
            assert_eq!(passable, 0);
            assert_eq!(error.expect("refused").to_string(), message);
        }
        let (_, error) = FrameCheck::new(false).check(&3u32.to_be_bytes());
        assert_eq!(error, Some(FrameError::StartupLength(3)));
    }

    #[test]
    fn copy_data_streams_without_being_held() {
        let mut check = FrameCheck::new(false);
        check.started = true;
        let mut header = b"d".to_vec();
        header.extend_from_slice(&(4u32 + 1_000_000).to_be_bytes());
        assert_eq!(check.check(&header), (5, None));
        assert_eq!(check.check(&[7u8; 4096]), (4096, None));
        assert_eq!(check.copy_left, 1_000_000 - 4096);
    }
}
