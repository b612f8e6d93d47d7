//! Issue 31.2: `procs serve --max-conns 8` with 8 peers that trickle a frame one byte at a
//! time (each from its own loopback address, re-connecting when closed) held every slot: a
//! connection in the middle of a frame was never evicted, and 0 of 8 queries were answered
//! until the frame timeout. Now, while newcomers are turned away, a frame still arriving a
//! second after its first byte gives its place up: a newcomer retrying is served, on every
//! model. `--frame-timeout 120s` keeps the frame timeout from doing it instead.

mod common;

use common::bin;
use iopath::servers::protocol::{self, Rank};
use iopath::servers::query::query;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TRICKLERS: u8 = 8;

/// A `procs serve` child, killed and reaped on drop.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(model: &str) -> Option<Served> {
    let mut child = Command::new(bin())
        .args(["procs", "serve", "--model", model, "--listen", "127.0.0.1:0"])
        .args(["--max-conns", &TRICKLERS.to_string(), "--frame-timeout", "120s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn procs serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("the first line");
    if line.is_empty() {
        let out = child.wait_with_output().expect("reap");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if model == "uring" && err.contains("io_uring unavailable") {
            common::skip(&format!("the uring model cannot run here: {}", err.trim()));
            return None;
        }
        panic!("server {model} did not start: {err}");
    }
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    Some(Served { child, addr })
}

/// A connection to `addr` from the loopback address `from`.
fn connect_from(addr: SocketAddr, from: [u8; 4]) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    socket.bind(&SocketAddr::from((from, 0)).into()).ok()?;
    socket.connect_timeout(&addr.into(), Duration::from_secs(5)).ok()?;
    Some(socket.into())
}

/// One trickler: the bytes of a 1 MiB echo request, one every 250 ms (never whole in the
/// test's time), re-connecting as soon as it sees its connection closed.
fn trickle(addr: SocketAddr, from: [u8; 4], done: &AtomicBool) {
    let mut frame = Vec::new();
    protocol::encode_echo_request(&vec![7u8; 1 << 20], &mut frame);
    let started = Instant::now();
    let mut conn: Option<(TcpStream, usize)> = None;
    // The test ends it; the time is a hang guard only.
    while !done.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(120) {
        let alive = conn.as_mut().is_some_and(|(s, sent)| {
            let mut byte = [0u8; 512];
            s.set_nonblocking(true).ok();
            let open = matches!(s.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
            let wrote = open && s.write(&frame[*sent..*sent + 1]).is_ok_and(|n| n == 1);
            *sent += 1;
            wrote
        });
        if !alive {
            conn = connect_from(addr, from).map(|s| (s, 0));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn newcomer_is_served_beside_tricklers(model: &str, subnet: u8) {
    let Some(server) = start(model) else {
        return;
    };
    let done = Arc::new(AtomicBool::new(false));
    let tricklers: Vec<_> = (0..TRICKLERS)
        .map(|i| {
            let done = done.clone();
            let addr = server.addr;
            std::thread::spawn(move || trickle(addr, [127, 0, subnet, 2 + i], &done))
        })
        .collect();
    // Every slot taken by a trickler first.
    std::thread::sleep(Duration::from_millis(700));
    let started = Instant::now();
    let mut last = String::new();
    let mut served = false;
    // A newcomer that retries when told the server is full; the bound is a hang guard.
    while started.elapsed() < Duration::from_secs(60) {
        match query(server.addr, 3, Rank::Total, Duration::from_secs(5)) {
            Ok(_) => {
                served = true;
                break;
            }
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done.store(true, Ordering::SeqCst);
    for t in tricklers {
        t.join().expect("trickler");
    }
    assert!(
        served,
        "{model}: a newcomer beside {TRICKLERS} tricklers was never served: {last}"
    );
    drop(server);
}

macro_rules! models {
    ($($name:ident => $model:expr, $subnet:expr;)*) => {$(
        #[test]
        fn $name() {
            newcomer_is_served_beside_tricklers($model, $subnet);
        }
    )*};
}

models! {
    iterative_serves_a_newcomer_beside_tricklers => "iterative", 10;
    threads_serves_a_newcomer_beside_tricklers => "threads", 11;
    pool_serves_a_newcomer_beside_tricklers => "pool", 12;
    select_serves_a_newcomer_beside_tricklers => "select", 13;
    poll_serves_a_newcomer_beside_tricklers => "poll", 14;
    epoll_serves_a_newcomer_beside_tricklers => "epoll", 15;
    epoll_et_serves_a_newcomer_beside_tricklers => "epoll-et", 16;
    uring_serves_a_newcomer_beside_tricklers => "uring", 17;
}
