//! The floor under any streaming client's CPU: what the kernel and the tokio runtime alone cost
//! for a given load, measured beside specperf by the bench scripts (`FLOOR=1`).
//!
//! Each request is one pre-built `/v1/completions` request (a body of `--body-bytes` bytes asking
//! for `--max-tokens` streamed tokens) written whole, then read into one buffer with one clock
//! reading per read (any client that times events must take one). By default each request has its
//! own connection (`Connection: close`, as `bench-serving` opens one per request) and ends when the
//! server closes it; with `--keep-alive` a lane keeps its connection (as `replay` and AgentX do)
//! and a response ends at its last chunk. Nothing is parsed: no HTTP, no chunked framing, no SSE,
//! no JSON, no records, no prompts. Whatever a real client spends beyond this process's CPU for
//! the same load is its own. It runs on the runtime of the command it stands beside: one thread
//! for a connection per request (bench-serving's), every core with `--keep-alive` (AgentX's).
//!
//! ```text
//! cargo build --release --example floor_client
//! target/release/examples/floor_client --url http://127.0.0.1:18090 --concurrency 512 \
//!     --requests 5120 --body-bytes 1400 --max-tokens 64
//! ```
//!
//! Prints one line: requests, bytes read, reads, wall seconds. CPU is measured outside it (GNU
//! time), as for the tools it is compared with.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    /// `HOST:PORT`, connected to and sent as the `host` header.
    host: String,
    concurrency: u64,
    requests: Option<u64>,
    duration: Option<Duration>,
    body_bytes: usize,
    max_tokens: u32,
    model: String,
    keep_alive: bool,
}

fn usage(why: &str) -> ! {
    eprintln!(
        "floor_client: {why}\nusage: floor_client --url http://HOST:PORT --concurrency N \
         (--requests N | --duration-s S) [--body-bytes B] [--max-tokens K] [--model M] [--keep-alive]"
    );
    std::process::exit(2)
}

fn parse() -> Args {
    let mut url = None;
    let mut concurrency = 64;
    let mut requests = None;
    let mut duration = None;
    let mut body_bytes = 1024;
    let mut max_tokens = 64;
    let mut model = "specperf-sim".to_string();
    let mut keep_alive = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--keep-alive" {
            keep_alive = true;
            continue;
        }
        let Some(value) = it.next() else {
            usage(&format!("{flag} needs a value"))
        };
        let number = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{flag} {v}: not a number")))
        };
        match flag.as_str() {
            "--url" => url = Some(value),
            "--concurrency" => concurrency = number(&value).max(1),
            "--requests" => requests = Some(number(&value)),
            "--duration-s" => duration = Some(Duration::from_secs(number(&value))),
            "--body-bytes" => body_bytes = number(&value) as usize,
            "--max-tokens" => max_tokens = number(&value) as u32,
            "--model" => model = value,
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    let url = url.unwrap_or_else(|| usage("--url is required"));
    let Some(host) = url.strip_prefix("http://").map(|h| h.trim_end_matches('/')) else {
        usage(&format!("--url {url}: only http://HOST:PORT"))
    };
    if requests.is_none() && duration.is_none() {
        usage("give --requests or --duration-s");
    }
    Args {
        host: host.to_string(),
        concurrency,
        requests,
        duration,
        body_bytes,
        max_tokens,
        model,
        keep_alive,
    }
}

/// One request's bytes: the head and a JSON body whose prompt pads it to `body_bytes`.
fn request(a: &Args) -> Vec<u8> {
    let open = format!(
        "{{\"model\":\"{}\",\"stream\":true,\"ignore_eos\":true,\"max_tokens\":",
        a.model
    );
    let mid = ",\"prompt\":\"";
    let close = "\"}";
    let fixed = open.len() + a.max_tokens.to_string().len() + mid.len() + close.len();
    let prompt = "word ".repeat(a.body_bytes.saturating_sub(fixed).div_ceil(5));
    let prompt = &prompt[..a.body_bytes.saturating_sub(fixed)];
    let body = format!("{open}{}{mid}{prompt}{close}", a.max_tokens);
    let mut bytes = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         {}content-length: {}\r\n\r\n",
        a.host,
        if a.keep_alive {
            ""
        } else {
            "connection: close\r\n"
        },
        body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

#[derive(Default)]
struct Totals {
    requests: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
    reads: AtomicU64,
}

/// The end of a chunked body (the server's streams are chunked).
const LAST_CHUNK: &[u8] = b"\r\n0\r\n\r\n";

/// One request on `conn` (a new connection when empty). With keep-alive the response ends at
/// its last chunk and the connection stays for the next; without, at the server's close.
async fn one(
    addr: &str,
    keep_alive: bool,
    conn: &mut Option<TcpStream>,
    req: &[u8],
    buf: &mut [u8],
    t: &Totals,
) -> std::io::Result<()> {
    let mut s = match conn.take() {
        Some(s) => s,
        None => {
            let s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            s
        }
    };
    s.write_all(req).await?;
    let mut last = Instant::now();
    let mut first = true;
    // The last bytes read, to find the last chunk across reads.
    let mut tail = [0u8; LAST_CHUNK.len()];
    loop {
        let n = s.read(buf).await?;
        // The clock reading any event timestamp needs.
        last = last.max(Instant::now());
        if n == 0 {
            if keep_alive {
                return Err(std::io::Error::other("the server closed mid-response"));
            }
            break;
        }
        if first {
            first = false;
            if !buf[..n].starts_with(b"HTTP/1.1 200") {
                let line = buf[..n].split(|b| *b == b'\r').next().unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "the server answered {}",
                    String::from_utf8_lossy(line)
                )));
            }
        }
        t.bytes.fetch_add(n as u64, Ordering::Relaxed);
        t.reads.fetch_add(1, Ordering::Relaxed);
        if keep_alive {
            let k = n.min(tail.len());
            tail.copy_within(k.., 0);
            let keep = tail.len() - k;
            tail[keep..].copy_from_slice(&buf[n - k..n]);
            if tail == LAST_CHUNK {
                *conn = Some(s);
                break;
            }
        }
    }
    std::hint::black_box(last);
    Ok(())
}

fn main() {
    let a = parse();
    // The runtime of the command it stands beside: bench-serving (a connection per request)
    // runs its requests on one thread, replay and AgentX (kept-alive lanes) on every core.
    let rt = if a.keep_alive {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
    .enable_all()
    .build()
    .expect("cannot start the async runtime");
    rt.block_on(run(a));
}

async fn run(a: Args) {
    let req: Arc<[u8]> = request(&a).into();
    let totals = Arc::new(Totals::default());
    let issued = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = a.duration.map(|d| start + d);
    let addr: Arc<str> = a.host.clone().into();
    let lanes: Vec<_> = (0..a.concurrency)
        .map(|_| {
            let (req, totals, issued, addr) =
                (req.clone(), totals.clone(), issued.clone(), addr.clone());
            let (limit, keep_alive) = (a.requests, a.keep_alive);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut conn = None;
                loop {
                    if limit.is_some_and(|n| issued.fetch_add(1, Ordering::Relaxed) >= n)
                        || deadline.is_some_and(|d| Instant::now() >= d)
                    {
                        break;
                    }
                    match one(&addr, keep_alive, &mut conn, &req, &mut buf, &totals).await {
                        Ok(()) => {
                            totals.requests.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            if totals.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                                eprintln!("floor_client: first failure: {e}");
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for lane in lanes {
        lane.await.expect("a lane panicked");
    }
    let t = &totals;
    println!(
        "floor requests {} failed {} bytes {} reads {} wall_s {:.3}",
        t.requests.load(Ordering::Relaxed),
        t.failed.load(Ordering::Relaxed),
        t.bytes.load(Ordering::Relaxed),
        t.reads.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
    if t.failed.load(Ordering::Relaxed) > 0 {
        std::process::exit(1);
    }
}
