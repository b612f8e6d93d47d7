//! A one-shot client for the procs service (`iopath procs query`): connect, ask, read one
//! reply, with timeouts on every step.

use super::protocol::{self, Decoded, ProcsReply, Rank, Response};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One reply and how long it took, connect included.
#[derive(Debug)]
pub struct QueryResult {
    pub reply: ProcsReply,
    pub elapsed: Duration,
}

/// Ask the server at `addr` for its top `k` processes.
pub fn query(addr: SocketAddr, k: u16, rank: Rank, timeout: Duration) -> Result<QueryResult, String> {
    let start = Instant::now();
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|_| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("cannot set timeouts: {e}"))?;
    let mut request = Vec::new();
    protocol::encode_procs_request(k, rank, &mut request);
    stream
        .write_all(&request)
        .map_err(|e| format!("sending to {addr} failed: {e}"))?;
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
        match stream.read(&mut chunk) {
            Ok(0) => return Err("server closed the connection before replying".into()),
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("no reply from {addr} within {timeout:?}"))
            }
            Err(e) => return Err(format!("receiving from {addr} failed: {e}")),
        }
    }
}
