//! HTTP/1.1 on plain `http://`, read where it arrives: the request's own task writes the request
//! (its head, then the body's shared slices, vectored) and reads the response from the socket,
//! decoding the framing in the read buffer and handing each data span to the SSE parser. No
//! per-connection task, no body channel: one wake-up, one `recv` and one copy of what came per
//! read. A read buffer exists only from the socket's readiness until its data is handed on, so a
//! stream waiting for its next event holds none. TLS and HTTP/2 stay on hyper (`client::follow`
//! picks).
//!
//! ```text
//! Pool::checkout ─► Conn ─► send(head + body slices) ─► head (httparse) ─► Response::next
//!      ▲                                                                        │ spans of
//!      └──────────────── the complete, kept-alive response gives it back ◄──────┘ the buffer
//! ```

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderMap, StatusCode, Uri};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::body::{Body, Payload, Slices};
use super::READ_CHUNK;
use crate::debug::{self, step};
use crate::record::FailureKind;

/// How long an idle connection is kept for reuse (hyper's pool kept them as long).
const IDLE_FOR: Duration = Duration::from_secs(90);

/// Most header lines a response head may carry (hyper's default).
const MAX_HEADERS: usize = 100;

/// Kept-alive connections to one `host:port`, each with the time it went idle, oldest first.
type Idle = VecDeque<(Conn, Instant)>;

/// Kept-alive connections by `host:port`, most recently used first out.
pub(super) struct Pool {
    idle: Mutex<HashMap<Box<str>, Idle>>,
    /// `false` under `--connection-reuse-strategy never`: every request its own connection.
    keep: bool,
    connect_timeout: Duration,
}

/// One connection, and how much it reads at once.
pub(super) struct Conn {
    sock: TcpStream,
    /// [`FIRST_READ`] bytes when opened; doubled up to [`READ_CHUNK`] when a read fills it.
    read_size: usize,
}

/// A new connection's read size. Most reads of a stream are one or a few SSE events; a
/// connection whose reads fill it reads more at once.
const FIRST_READ: usize = 4 << 10;

impl Conn {
    /// Waits until the socket has bytes (or its end), then reads at most `read_size` of them,
    /// and at most `room`, onto `buf`. Nothing is allocated while waiting: 8,192 streams each
    /// keeping a buffer between their events held 30 MiB of them (and the buffers that had
    /// grown, 8 MiB more). Cancel-safe: nothing is read until the socket is ready.
    async fn read_onto(&mut self, buf: &mut Vec<u8>, room: usize) -> std::io::Result<usize> {
        let most = self.read_size.min(room);
        loop {
            self.sock.readable().await?;
            // Read into this thread's scratch and keep only what came: readiness is often
            // stale (a read that did not empty the socket leaves it set), and a buffer reserved
            // for a read that would block would then be held through the wait.
            let read: std::io::Result<usize> = SCRATCH.with_borrow_mut(|scratch| {
                let n = self.sock.try_read(&mut scratch[..most])?;
                buf.extend_from_slice(&scratch[..n]);
                Ok(n)
            });
            match read {
                Ok(n) => {
                    if n == most {
                        self.read_size = bigger(self.read_size);
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

thread_local! {
    /// Where every connection of this thread reads, between a socket's readiness and the copy
    /// of what came; never held across a wait.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}

/// The next read size after a read that filled `size`: twice it, at most [`READ_CHUNK`].
fn bigger(size: usize) -> usize {
    (size * 2).min(READ_CHUNK)
}

/// Why a send got no response head.
#[derive(Debug)]
pub(super) struct SendError {
    pub(super) kind: FailureKind,
    pub(super) msg: String,
    /// A kept-alive connection was closed before any byte of the answer: the request never
    /// reached the application and may go again, once, on a fresh connection.
    pub(super) closed_after_reuse: bool,
}

impl SendError {
    fn closed(msg: String) -> Self {
        SendError {
            kind: FailureKind::ConnectionClosed,
            msg,
            closed_after_reuse: false,
        }
    }
}

/// A response whose head has arrived; its body is read with [`Response::next`].
pub(super) struct Response {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    /// The connection was taken from the pool, not opened for this request.
    pub(super) reused: bool,
    /// The request body's length, as written.
    pub(super) bytes_sent: u64,
    conn: Option<Conn>,
    pool: Arc<Pool>,
    key: Box<str>,
    framing: Framing,
    keep_alive: bool,
    /// The last read (with the head's, the bytes after it); freed before the next wait.
    buf: Vec<u8>,
    /// `buf[pending..]`: read but not yet decoded.
    pending: usize,
    /// The data of the last read, as ranges of `buf`.
    spans: Vec<(usize, usize)>,
}

/// How the body's end is known.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Framing {
    Length(u64),
    Chunked(Chunk),
    /// Until the server closes (no length given): the connection cannot be reused.
    Eof,
    Done,
}

/// Where the chunked decoder is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Chunk {
    /// Reading the size's hex digits (`digits` of them so far).
    Size {
        size: u64,
        digits: u8,
    },
    /// Past the size: whitespace or an extension, up to the line's end.
    SizeRest(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines, then an empty line. `start`: at a line's start.
    Trailer {
        start: bool,
    },
    TrailerLf,
}

/// The framing broke: the message is the failure's.
#[derive(Debug, PartialEq)]
pub(super) struct Broken(pub(super) String);

impl Pool {
    pub(super) fn new(keep: bool, connect_timeout: Duration) -> Self {
        Pool {
            idle: Mutex::new(HashMap::new()),
            keep,
            connect_timeout,
        }
    }

    /// A kept-alive connection to `key` the server has not closed, if there is one.
    fn checkout(&self, key: &str) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let conns = idle.get_mut(key)?;
        while let Some((conn, since)) = conns.pop_back() {
            if since.elapsed() < IDLE_FOR && conn.open() {
                return Some(conn);
            }
        }
        None
    }

    fn checkin(&self, key: &str, conn: Conn) {
        if !self.keep {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let conns = idle.entry(key.into()).or_default();
        while conns.front().is_some_and(|(_, t)| t.elapsed() >= IDLE_FOR) {
            conns.pop_front();
        }
        conns.push_back((conn, Instant::now()));
    }

    /// Opens a connection to `host:port` within the connect timeout, trying each address.
    async fn connect(&self, host: &str, port: u16) -> Result<Conn, SendError> {
        let shown = debug::on().then(Instant::now);
        let limit = self.connect_timeout;
        let r = match tokio::time::timeout(limit, open(host, port)).await {
            Ok(Ok(sock)) => Ok(Conn {
                sock,
                read_size: FIRST_READ,
            }),
            Ok(Err(e)) => Err(SendError {
                kind: FailureKind::Connect,
                msg: format!("tcp connect error: {e}"),
                closed_after_reuse: false,
            }),
            Err(_) => Err(SendError {
                kind: FailureKind::ConnectTimeout,
                msg: format!("connect timed out after {limit:?}"),
                closed_after_reuse: false,
            }),
        };
        if let Some(t0) = shown {
            let how = match &r {
                Ok(_) => "open".to_owned(),
                Err(e) => format!("failed ({})", e.msg),
            };
            step!(
                "connect {host}:{port}: {how} in {}",
                debug::ms(t0.elapsed())
            );
        }
        r
    }
}

async fn open(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port)).await?.collect();
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(sock) => {
                sock.set_nodelay(true)?;
                return Ok(sock);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{host} resolves to no address"),
        )
    }))
}

impl Conn {
    /// Whether the server has left it open: nothing to read yet (an idle connection that can
    /// be read from was closed, or sent what nobody asked for).
    fn open(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.sock.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// What a request carries besides the configured headers.
pub(super) enum Ask<'a> {
    /// A benchmark request: a JSON body, and an event stream accepted when `streaming`.
    Post { body: &'a Payload, streaming: bool },
    /// A `GET` without a body (the start's connection warm-up).
    Get,
}

/// The request head: request line, `host`, the headers in order, then what `ask` adds (the
/// body's type and length, the accepted type), as hyper wrote them.
fn head(uri: &Uri, host: &str, headers: &[&HeaderMap], ask: &Ask<'_>, body_len: usize) -> Vec<u8> {
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(match ask {
        Ask::Post { .. } => b"POST ",
        Ask::Get => b"GET ",
    });
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.iter().any(|h| h.contains_key(http::header::HOST)) {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (k, v) in headers.iter().flat_map(|h| h.iter()) {
        if k == http::header::CONTENT_LENGTH || k == http::header::TRANSFER_ENCODING {
            continue;
        }
        out.extend_from_slice(k.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match ask {
        Ask::Post { streaming, .. } => {
            out.extend_from_slice(b"content-type: application/json\r\n");
            if *streaming {
                out.extend_from_slice(b"accept: text/event-stream\r\n");
            }
            out.extend_from_slice(format!("content-length: {body_len}\r\n\r\n").as_bytes());
        }
        Ask::Get => out.extend_from_slice(b"accept: */*\r\n\r\n"),
    }
    out
}

/// `host[:port]` as the `host` header names it (the port left out when it is 80).
fn authority(uri: &Uri) -> Option<(String, u16)> {
    let host = uri.host()?;
    let port = uri.port_u16().unwrap_or(80);
    Some(match uri.port_u16() {
        Some(p) if p != 80 => (format!("{host}:{p}"), port),
        _ => (host.to_owned(), port),
    })
}

/// Sends `ask` to `uri` with `headers` (in order) and reads the response head. On a fresh
/// connection when `fresh`, else on a kept-alive one when the pool has one.
pub(super) async fn send(
    pool: &Arc<Pool>,
    uri: &Uri,
    headers: &[&HeaderMap],
    ask: Ask<'_>,
    fresh: bool,
) -> Result<Response, SendError> {
    let Some((host, port)) = authority(uri) else {
        return Err(SendError {
            kind: FailureKind::Transport,
            msg: format!("{uri} names no host"),
            closed_after_reuse: false,
        });
    };
    let key: Box<str> = format!("{}:{port}", uri.host().unwrap_or_default()).into();
    let pooled = if fresh { None } else { pool.checkout(&key) };
    let reused = pooled.is_some();
    let mut conn = match pooled {
        Some(c) => c,
        None => pool.connect(uri.host().unwrap_or_default(), port).await?,
    };
    // A kept-alive connection that fails before any byte of the answer was closed by the
    // server between requests.
    let lost = |e: std::io::Error, answered: bool| {
        use std::io::ErrorKind::*;
        let quiet_close = matches!(
            e.kind(),
            ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
        );
        let msg = if e.kind() == UnexpectedEof {
            "connection closed before message completed".to_owned()
        } else {
            format!("connection error: {e}")
        };
        SendError {
            kind: FailureKind::ConnectionClosed,
            msg,
            closed_after_reuse: reused && quiet_close && !answered,
        }
    };
    // Made now that the connection is ready, and dropped once written: the head may be long in
    // coming, and nothing is resent on this connection.
    let body = match &ask {
        Ask::Post { body, .. } => body.body(),
        Ask::Get => Body::default(),
    };
    let bytes_sent = body.len() as u64;
    let head = head(uri, &host, headers, &ask, body.len());
    write(&mut conn.sock, &head, body.slices())
        .await
        .map_err(|e| lost(e, false))?;
    drop((head, body));

    // The head: read until it parses, at most READ_CHUNK of it.
    let mut buf = Vec::new();
    loop {
        let answered = !buf.is_empty();
        let room = READ_CHUNK - buf.len();
        match conn.read_onto(&mut buf, room).await {
            Ok(0) => Err(std::io::ErrorKind::UnexpectedEof.into()),
            r => r,
        }
        .map_err(|e| lost(e, answered))?;
        let filled = buf.len();
        let mut lines = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut lines);
        let at = match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(at)) => at,
            Ok(httparse::Status::Partial) if filled < READ_CHUNK => continue,
            Ok(httparse::Status::Partial) => {
                return Err(SendError::closed(format!(
                    "response head too large (over {READ_CHUNK} bytes)"
                )))
            }
            Err(e) => return Err(SendError::closed(format!("invalid response head: {e}"))),
        };
        let code = parsed.code.unwrap_or_default();
        let status = StatusCode::from_u16(code)
            .map_err(|_| SendError::closed(format!("invalid response status {code}")))?;
        let http10 = parsed.version == Some(0);
        let mut map = HeaderMap::with_capacity(parsed.headers.len());
        for h in parsed.headers.iter() {
            let name = http::HeaderName::from_bytes(h.name.as_bytes());
            let value = http::HeaderValue::from_bytes(h.value);
            if let (Ok(n), Ok(v)) = (name, value) {
                map.append(n, v);
            }
        }
        if status.is_informational() {
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(SendError::closed(
                    "unexpected 101 Switching Protocols".into(),
                ));
            }
            // 100 Continue and the like: the real head follows.
            buf.drain(..at);
            continue;
        }
        let (framing, keep_alive) =
            framing(status, http10, &map).map_err(|b| SendError::closed(b.0))?;
        return Ok(Response {
            status,
            headers: map,
            reused,
            bytes_sent,
            conn: Some(conn),
            pool: pool.clone(),
            key,
            framing,
            keep_alive,
            buf,
            pending: at,
            spans: Vec::new(),
        });
    }
}

/// Writes the head, then every slice of the body, as few `writev`s as the socket takes.
async fn write(sock: &mut TcpStream, head: &[u8], mut rest: Slices) -> std::io::Result<()> {
    let mut head = head;
    loop {
        // Up to 256 slices per `writev` (a 100k-token AgentX body is ~1,000), on the heap, so the
        // request's future does not carry the array for its whole life.
        let mut iov = vec![IoSlice::new(&[]); 256];
        let mut n = 0;
        if !head.is_empty() {
            iov[0] = IoSlice::new(head);
            n = 1;
        }
        n += bytes::Buf::chunks_vectored(&rest, &mut iov[n..]);
        if n == 0 {
            return Ok(());
        }
        let mut wrote = sock.write_vectored(&iov[..n]).await?;
        drop(iov);
        if wrote == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = wrote.min(head.len());
        head = &head[from_head..];
        wrote -= from_head;
        bytes::Buf::advance(&mut rest, wrote);
    }
}

/// How the body of a response with this status and these headers ends, and whether the
/// connection may serve another request after it (RFC 9112, section 6.3).
fn framing(status: StatusCode, http10: bool, h: &HeaderMap) -> Result<(Framing, bool), Broken> {
    let tokens = |name| {
        h.get_all(name)
            .iter()
            .flat_map(|v| v.to_str().unwrap_or_default().split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    let connection = tokens(http::header::CONNECTION);
    let mut keep = if http10 {
        connection.iter().any(|t| t == "keep-alive")
    } else {
        !connection.iter().any(|t| t == "close")
    };
    if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Ok((Framing::Done, keep));
    }
    let coding = tokens(http::header::TRANSFER_ENCODING);
    if let Some(last) = coding.last() {
        if last == "chunked" {
            return Ok((Framing::Chunked(Chunk::Size { size: 0, digits: 0 }), keep));
        }
        return Ok((Framing::Eof, false));
    }
    let mut length = None;
    for v in h.get_all(http::header::CONTENT_LENGTH) {
        for part in v.to_str().unwrap_or("x").split(',') {
            let n: u64 = part
                .trim()
                .parse()
                .map_err(|_| Broken(format!("invalid content-length {v:?}")))?;
            if length.is_some_and(|l| l != n) {
                return Err(Broken("conflicting content-length headers".into()));
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(0) => (Framing::Done, keep),
        Some(n) => (Framing::Length(n), keep),
        None => {
            keep = false;
            (Framing::Eof, keep)
        }
    })
}

impl Response {
    /// Waits for the body's next bytes: `Ok(true)` when a read brought data ([`Self::spans`]),
    /// `Ok(false)` at the body's end (a kept-alive connection then goes back to the pool).
    /// Cancel-safe: dropped while waiting, nothing read is lost (the connection goes with it).
    pub(super) async fn next(&mut self) -> Result<bool, Broken> {
        self.spans.clear();
        loop {
            if self.framing == Framing::Done {
                if let Some(conn) = self.conn.take() {
                    if self.keep_alive && self.pending == self.buf.len() {
                        self.pool.checkin(&self.key, conn);
                    }
                }
                self.buf = Vec::new();
                self.pending = 0;
                return Ok(false);
            }
            if self.pending < self.buf.len() {
                self.decode()?;
                if !self.spans.is_empty() {
                    return Ok(true);
                }
                continue;
            }
            let Some(conn) = self.conn.as_mut() else {
                return Ok(false);
            };
            // Every span of the last read is handed on: its buffer goes before the wait.
            self.buf = Vec::new();
            self.pending = 0;
            let n = conn
                .read_onto(&mut self.buf, READ_CHUNK)
                .await
                .map_err(|e| Broken(format!("connection error: {e}")))?;
            if n == 0 {
                if self.framing == Framing::Eof {
                    self.framing = Framing::Done;
                    self.keep_alive = false;
                    continue;
                }
                return Err(Broken("connection closed before message completed".into()));
            }
        }
    }

    /// The `i`-th span of data the last [`Self::next`] brought.
    pub(super) fn span(&self, i: usize) -> Option<&[u8]> {
        let &(a, b) = self.spans.get(i)?;
        Some(&self.buf[a..b])
    }

    /// Decodes `buf[pending..filled]` into data spans, moving the framing on.
    fn decode(&mut self) -> Result<(), Broken> {
        let end = self.buf.len();
        let at = decode(&mut self.framing, &self.buf, self.pending, &mut self.spans)?;
        self.pending = end;
        if at < end {
            // Bytes after the message that nobody asked for: not a connection to reuse.
            self.keep_alive = false;
        }
        Ok(())
    }
}

/// Decodes `buf[at..]` under `framing`, pushing the data's ranges on `spans`; returns where it
/// stopped: the buffer's end, or the message's when it ended inside the buffer.
fn decode(
    framing: &mut Framing,
    buf: &[u8],
    mut at: usize,
    spans: &mut Vec<(usize, usize)>,
) -> Result<usize, Broken> {
    let end = buf.len();
    let mut take = |at: usize, n: u64| {
        let n = n.min((end - at) as u64) as usize;
        spans.push((at, at + n));
        n
    };
    while at < end {
        match framing {
            Framing::Done => break,
            Framing::Eof => at += take(at, u64::MAX),
            Framing::Length(left) => {
                let n = take(at, *left);
                at += n;
                *left -= n as u64;
                if *left == 0 {
                    *framing = Framing::Done;
                }
            }
            Framing::Chunked(Chunk::Data(left)) => {
                let n = take(at, *left);
                at += n;
                *left -= n as u64;
                if *left == 0 {
                    *framing = Framing::Chunked(Chunk::DataCr);
                }
            }
            Framing::Chunked(state) => {
                // A whole `HEX\r\n` size line, or the `\r\n` after a chunk's data, in one go
                // (the usual case: a server writes each chunk whole); anything else byte by byte.
                let rest = &buf[at..];
                if *state == (Chunk::Size { size: 0, digits: 0 }) {
                    if let Some((size, used)) = size_line(rest) {
                        *framing = Framing::Chunked(after_size(size));
                        at += used;
                        continue;
                    }
                }
                if *state == Chunk::DataCr && rest.starts_with(b"\r\n") {
                    *framing = Framing::Chunked(Chunk::Size { size: 0, digits: 0 });
                    at += 2;
                    continue;
                }
                *framing = match step(*state, buf[at])? {
                    Some(next) => Framing::Chunked(next),
                    None => Framing::Done,
                };
                at += 1;
            }
        }
    }
    Ok(at)
}

/// A chunk-size line of 1 to 16 hex digits and its line end (`\r\n` or `\n`) at the start of
/// `b`: the size and the bytes it took. `None` for anything else (an extension, a line not
/// all here, a malformed one), which [`step`] then reads byte by byte.
fn size_line(b: &[u8]) -> Option<(u64, usize)> {
    let digits = b
        .iter()
        .take(17)
        .take_while(|c| c.is_ascii_hexdigit())
        .count();
    if digits == 0 || digits > 16 {
        return None;
    }
    let end = match &b[digits..] {
        [b'\r', b'\n', ..] => digits + 2,
        [b'\n', ..] => digits + 1,
        _ => return None,
    };
    let size = b[..digits].iter().fold(0u64, |n, &c| {
        n << 4 | u64::from((c as char).to_digit(16).expect("a hex digit"))
    });
    Some((size, end))
}

/// One framing byte of a chunked body: the next state, or `None` once the message ended.
fn step(state: Chunk, b: u8) -> Result<Option<Chunk>, Broken> {
    let bad = |what: &str| Err(Broken(format!("invalid chunked body: {what}")));
    Ok(Some(match state {
        Chunk::Size { size, digits } => match (b as char).to_digit(16) {
            Some(d) if digits < 16 => Chunk::Size {
                size: size << 4 | d as u64,
                digits: digits + 1,
            },
            Some(_) => return bad("chunk size too large"),
            None if digits == 0 => return bad("chunk size expected"),
            None => match b {
                b'\r' => Chunk::SizeLf(size),
                b'\n' => after_size(size),
                _ => Chunk::SizeRest(size),
            },
        },
        Chunk::SizeRest(size) => match b {
            b'\r' => Chunk::SizeLf(size),
            b'\n' => after_size(size),
            _ => Chunk::SizeRest(size),
        },
        Chunk::SizeLf(size) if b == b'\n' => after_size(size),
        Chunk::SizeLf(_) => return bad("line feed expected after the chunk size"),
        Chunk::Data(_) => unreachable!("data is taken whole, not byte by byte"),
        Chunk::DataCr => match b {
            b'\r' => Chunk::DataLf,
            b'\n' => Chunk::Size { size: 0, digits: 0 },
            _ => return bad("line end expected after the chunk data"),
        },
        Chunk::DataLf if b == b'\n' => Chunk::Size { size: 0, digits: 0 },
        Chunk::DataLf => return bad("line feed expected after the chunk data"),
        Chunk::Trailer { start: true } => match b {
            b'\r' => Chunk::TrailerLf,
            b'\n' => return Ok(None),
            _ => Chunk::Trailer { start: false },
        },
        Chunk::Trailer { start: false } => Chunk::Trailer { start: b == b'\n' },
        Chunk::TrailerLf if b == b'\n' => return Ok(None),
        Chunk::TrailerLf => return bad("line feed expected at the end of the trailers"),
    }))
}

fn after_size(size: u64) -> Chunk {
    if size == 0 {
        Chunk::Trailer { start: true }
    } else {
        Chunk::Data(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Decodes `wire` (everything after the head) as it would arrive in reads cut at `cuts`:
    /// the data, and whether the message ended.
    fn decode_in_reads(
        mut framing: Framing,
        wire: &[u8],
        cuts: &[usize],
    ) -> Result<(Vec<u8>, bool), Broken> {
        let mut data = Vec::new();
        let mut at = 0;
        for &end in cuts.iter().chain([&wire.len()]) {
            let read = &wire[at..end];
            at = end;
            let mut spans = Vec::new();
            decode(&mut framing, read, 0, &mut spans)?;
            spans
                .iter()
                .for_each(|&(a, b)| data.extend_from_slice(&read[a..b]));
        }
        Ok((data, framing == Framing::Done))
    }

    fn chunked() -> Framing {
        Framing::Chunked(Chunk::Size { size: 0, digits: 0 })
    }

    #[test]
    fn the_read_size_doubles_to_the_cap() {
        let mut sizes = vec![FIRST_READ];
        while sizes.len() < 5 {
            sizes.push(bigger(sizes[sizes.len() - 1]));
        }
        assert_eq!(sizes, [4 << 10, 8 << 10, 16 << 10, 16 << 10, 16 << 10]);
        assert_eq!(READ_CHUNK, 16 << 10);
    }

    /// A head past the first read and a body past the largest one, each written at once: the
    /// read size grows while reads fill it, every byte arrives once, in order, and the response
    /// holds no buffer once it ended.
    #[tokio::test]
    async fn reads_that_fill_the_buffer_grow_it_and_lose_nothing() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let body: Vec<u8> = (0..40_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let padding = "p".repeat(6 << 10);
        let answer = [
            format!(
                "HTTP/1.1 200 OK\r\nx-pad: {padding}\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes(),
            body.clone(),
        ]
        .concat();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = vec![0; 1024];
            let _ = sock.read(&mut req).await.unwrap();
            sock.write_all(&answer).await.unwrap();
            sock
        });
        let pool = Arc::new(Pool::new(true, Duration::from_secs(5)));
        let uri: Uri = format!("http://{addr}/x").parse().unwrap();
        let mut r = send(&pool, &uri, &[], Ask::Get, true).await.unwrap();
        assert_eq!(r.headers["x-pad"].len(), padding.len());
        let mut got = Vec::new();
        while r.next().await.unwrap() {
            let mut i = 0;
            while let Some(span) = r.span(i) {
                got.extend_from_slice(span);
                i += 1;
            }
        }
        assert_eq!(got, body);
        assert_eq!(r.buf.capacity(), 0);
        let _sock = server.await.unwrap();
        let conn = pool.checkout(&format!("{addr}")).expect("kept alive");
        assert_eq!(conn.read_size, READ_CHUNK);
    }

    #[test]
    fn a_chunked_body_decodes_the_same_however_reads_cut_it() {
        let wire = b"6\r\ndata: \r\n19;ext=1\r\n{\"choices\":[]}\n\ndata: [DO\r\n4 \r\nNE]\n\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let want = b"data: {\"choices\":[]}\n\ndata: [DONE]\n".to_vec();
        for cut in 0..=wire.len() {
            assert_eq!(
                decode_in_reads(chunked(), wire, &[cut]),
                Ok((want.clone(), true)),
                "cut at {cut}"
            );
            for second in cut..=wire.len() {
                assert_eq!(
                    decode_in_reads(chunked(), wire, &[cut, second]).map(|d| d.0),
                    Ok(want.clone())
                );
            }
        }
    }

    #[test]
    fn a_broken_chunked_body_is_named_and_an_unfinished_one_is_not_ended() {
        assert_eq!(
            decode_in_reads(chunked(), b"zz\r\n", &[]),
            Err(Broken("invalid chunked body: chunk size expected".into()))
        );
        assert_eq!(
            decode_in_reads(chunked(), b"2\r\nabX", &[]),
            Err(Broken(
                "invalid chunked body: line end expected after the chunk data".into()
            ))
        );
        assert_eq!(
            decode_in_reads(chunked(), b"11111111111111111\r\n", &[]),
            Err(Broken("invalid chunked body: chunk size too large".into()))
        );
        assert_eq!(
            decode_in_reads(chunked(), b"5\r\nab", &[]),
            Ok((b"ab".to_vec(), false))
        );
        assert_eq!(
            decode_in_reads(Framing::Length(5), b"abcde", &[2]),
            Ok((b"abcde".to_vec(), true))
        );
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn the_framing_and_reuse_follow_rfc_9112() {
        let ok = StatusCode::OK;
        let f = |h: &[(&str, &str)]| framing(ok, false, &headers(h));
        assert_eq!(
            f(&[("transfer-encoding", "chunked"), ("content-length", "9")]),
            Ok((chunked(), true))
        );
        assert_eq!(
            f(&[("content-length", "12")]),
            Ok((Framing::Length(12), true))
        );
        assert_eq!(f(&[("content-length", "0")]), Ok((Framing::Done, true)));
        assert_eq!(f(&[]), Ok((Framing::Eof, false)));
        assert_eq!(
            f(&[("content-length", "3"), ("connection", "Close")]),
            Ok((Framing::Length(3), false))
        );
        assert_eq!(
            f(&[("transfer-encoding", "gzip")]),
            Ok((Framing::Eof, false))
        );
        assert!(f(&[("content-length", "3"), ("content-length", "4")]).is_err());
        assert!(f(&[("content-length", "-1")]).is_err());
        assert_eq!(
            framing(ok, true, &headers(&[("content-length", "3")])),
            Ok((Framing::Length(3), false)),
            "HTTP/1.0 closes unless it says keep-alive"
        );
        assert_eq!(
            framing(StatusCode::NO_CONTENT, false, &headers(&[])),
            Ok((Framing::Done, true))
        );
    }

    #[test]
    fn the_head_names_the_host_as_hyper_did_and_sends_the_exact_length() {
        let uri: Uri = "http://127.0.0.1:8000/v1/chat/completions?x=1"
            .parse()
            .unwrap();
        let (host, port) = authority(&uri).unwrap();
        assert_eq!((host.as_str(), port), ("127.0.0.1:8000", 8000));
        let (h, r) = (
            headers(&[("x-api-key", "k")]),
            headers(&[("x-request-id", "r1")]),
        );
        let body = Payload::from(bytes::Bytes::from(vec![b'x'; 42]));
        let ask = Ask::Post {
            body: &body,
            streaming: true,
        };
        let head = head(&uri, &host, &[&h, &r], &ask, 42);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n\
             x-api-key: k\r\nx-request-id: r1\r\ncontent-type: application/json\r\n\
             accept: text/event-stream\r\ncontent-length: 42\r\n\r\n"
        );
        let uri: Uri = "http://server/v1".parse().unwrap();
        assert_eq!(authority(&uri), Some(("server".to_owned(), 80)));
    }
}
