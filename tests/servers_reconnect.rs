//! `procs serve --max-conns 1`: a client that finishes, waits for the server to close its
//! connection and reconnects at once must be served every time. The server once closed the
//! socket before giving back the connection's place under --max-conns (b7018b7 fixed the drop
//! order of the slot and the socket in every model), so a client reconnecting the moment it
//! saw the close could be told "server full" although it was the only client.

mod common;

use common::bin;
use iopath::servers::protocol::{self, Decoded, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Reconnections per model, or fewer when the time below runs out first.
const ROUNDS: usize = 200;
const ROUNDS_WITHIN: Duration = Duration::from_secs(5);

struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    /// The server, or None when the model cannot run here (skip recorded).
    fn start(model: &str) -> Option<Served> {
        let mut child = Command::new(bin())
            .args(["procs", "serve", "--model", model, "--listen", "127.0.0.1:0"])
            .args(["--max-conns", "1"])
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

    /// SIGINT and the stop line on stderr (bounded wait).
    fn stop(mut self) -> String {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .expect("SIGINT");
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.child.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < deadline, "the server did not stop within 15 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .expect("piped stderr")
            .read_to_string(&mut err)
            .expect("stderr");
        err
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One client: an echo, then the client's end closed and the server's close awaited. The
/// reply: Ok for the echo, Err with what came instead.
fn one_client(addr: SocketAddr, n: usize) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let payload = format!("client {n}");
    let mut req = Vec::new();
    protocol::encode_echo_request(payload.as_bytes(), &mut req);
    s.write_all(&req).map_err(|e| format!("write: {e}"))?;
    let mut input = Vec::new();
    let mut chunk = [0u8; 4096];
    let reply = loop {
        match protocol::decode_response(&input) {
            Decoded::Frame(resp, _) => break resp,
            Decoded::Invalid(e) => return Err(format!("a bad frame: {e}")),
            Decoded::Incomplete(_) => {}
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err("closed before a reply".into()),
            Ok(k) => input.extend_from_slice(&chunk[..k]),
            Err(e) => return Err(format!("read: {e}")),
        }
    };
    match reply {
        Response::Echo(back) if back == payload.as_bytes() => {}
        other => return Err(format!("{other:?}")),
    }
    // Done: the server sees end of file and closes; wait for that close, then go again at once.
    s.shutdown(Shutdown::Write).map_err(|e| format!("shutdown: {e}"))?;
    match s.read(&mut chunk) {
        Ok(0) => Ok(()),
        Ok(k) => Err(format!("{k} bytes after the reply")),
        Err(e) => Err(format!("waiting for the close: {e}")),
    }
}

/// The number before `what` in the server's stop line ("N connections accepted, M refused").
fn count(stop_line: &str, what: &str) -> usize {
    let at = stop_line
        .find(what)
        .unwrap_or_else(|| panic!("no '{what}' in {stop_line}"));
    stop_line[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before '{what}' in {stop_line}"))
}

fn reconnect_at_once(model: &str) {
    let Some(server) = Served::start(model) else {
        return;
    };
    let started = Instant::now();
    let mut served = 0;
    while served < ROUNDS && started.elapsed() < ROUNDS_WITHIN {
        if let Err(e) = one_client(server.addr, served) {
            let _ = server.stop();
            panic!("{model}: reconnection {served} after the server's close was not served: {e}");
        }
        served += 1;
    }
    assert!(served > 0, "{model}: no client ran");
    let err = server.stop();
    assert_eq!(count(&err, "connections accepted"), served, "{model}: {err}");
    assert_eq!(count(&err, "refused"), 0, "{model}: {err}");
}

macro_rules! models {
    ($($name:ident => $model:expr;)*) => {$(
        #[test]
        fn $name() {
            reconnect_at_once($model);
        }
    )*};
}

models! {
    iterative_reconnect_at_once => "iterative";
    threads_reconnect_at_once => "threads";
    pool_reconnect_at_once => "pool";
    select_reconnect_at_once => "select";
    poll_reconnect_at_once => "poll";
    epoll_reconnect_at_once => "epoll";
    epoll_et_reconnect_at_once => "epoll-et";
    uring_reconnect_at_once => "uring";
}
