//! A one-shot client for the procs service (`iopath procs query`): connect, ask, read one
//! reply. `timeout` is a deadline for each step as a whole (connect, send, the reply), not for
//! each read: a server that trickles its reply a byte at a time cannot hold the client longer.

use super::protocol::{self, Decoded, ProcsReply, Rank, Response};
use crate::net::control::describe_io_error;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One reply and how long it took, connect included.
#[derive(Debug)]
pub struct QueryResult {
    pub reply: ProcsReply,
    pub elapsed: Duration,
}

/// Time left before `deadline`, or None once it has passed.
fn left(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
}

/// Ask the server at `addr` for its top `k` processes.
pub fn query(addr: SocketAddr, k: u16, rank: Rank, timeout: Duration) -> Result<QueryResult, String> {
    let start = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot connect to {addr}: {}", describe_io_error(&e, timeout)))?;
    let mut request = Vec::new();
    protocol::encode_procs_request(k, rank, &mut request);
    // The request is a few bytes: one write, within the timeout.
    stream
        .set_write_timeout(Some(timeout))
        .and_then(|_| stream.write_all(&request))
        .map_err(|e| format!("sending to {addr} failed: {}", describe_io_error(&e, timeout)))?;
    let deadline = Instant::now() + timeout;
    let no_reply = |got: usize| {
        let waited = describe_io_error(&io::ErrorKind::TimedOut.into(), timeout);
        if got == 0 {
            format!("no reply from {addr}: {waited}")
        } else {
            format!("no whole reply from {addr} ({got} bytes came): {waited}")
        }
    };
    let mut input = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        match protocol::decode_response(&input) {
            Decoded::Frame(Response::Procs(reply), _) => {
                return Ok(QueryResult {
                    reply,
                    elapsed: start.elapsed(),
                })
            }
            Decoded::Frame(Response::Error(e), _) => return Err(format!("server refused: {e}")),
            Decoded::Frame(Response::Echo(_), _) => return Err("server sent an echo reply to a procs request".into()),
            Decoded::Invalid(e) => return Err(format!("bad reply: {e}")),
            Decoded::Incomplete(_) => {}
        }
        let Some(wait) = left(deadline) else {
            return Err(no_reply(input.len()));
        };
        stream
            .set_read_timeout(Some(wait))
            .map_err(|e| format!("cannot set a timeout: {e}"))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Err("server closed the connection before replying".into()),
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(no_reply(input.len()))
            }
            Err(e) => {
                return Err(format!(
                    "receiving from {addr} failed: {}",
                    describe_io_error(&e, timeout)
                ))
            }
        }
    }
}
