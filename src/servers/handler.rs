//! The request handler every model calls: decode whole frames from a connection's input,
//! append the encoded responses to its output. No I/O here, so all models share it exactly.

use super::procs::ProcsService;
use super::protocol::{self, Decoded, ErrorCode, ProtocolError, Request};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counts kept by the server side, all models alike.
#[derive(Default)]
pub struct ServerStats {
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub requests: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub idle_closed: AtomicU64,
    /// Closed for sending a frame slower than the frame timeout.
    pub slow_closed: AtomicU64,
    /// Closed to give a newcomer its place (admission.rs), or its turn (iterative).
    pub evicted: AtomicU64,
    pub io_errors: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

impl ServerStats {
    pub fn bump(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }
}

pub struct Handler {
    procs: ProcsService,
    pub stats: ServerStats,
}

/// What handling a buffer did.
#[derive(Debug, PartialEq, Eq)]
pub struct Handled {
    /// Input bytes used (whole frames only).
    pub consumed: usize,
    /// A bad frame was answered with an error: close after the output is flushed.
    pub close: bool,
}

impl Handler {
    pub fn new(procs_interval: Option<Duration>) -> Handler {
        Handler {
            procs: ProcsService::new(procs_interval),
            stats: ServerStats::default(),
        }
    }

    /// Answer every whole request at the front of `input`, appending replies to `out`.
    pub fn handle(&self, input: &[u8], out: &mut Vec<u8>) -> Handled {
        let mut consumed = 0;
        loop {
            match protocol::decode_request(&input[consumed..]) {
                Decoded::Incomplete(_) => return Handled { consumed, close: false },
                Decoded::Invalid(err) => {
                    ServerStats::bump(&self.stats.protocol_errors, 1);
                    protocol::encode_error(&err, out);
                    return Handled {
                        consumed: input.len(),
                        close: true,
                    };
                }
                Decoded::Frame(request, used) => {
                    consumed += used;
                    ServerStats::bump(&self.stats.requests, 1);
                    self.answer(request, out);
                }
            }
        }
    }

    fn answer(&self, request: Request<'_>, out: &mut Vec<u8>) {
        match request {
            Request::Echo(payload) => protocol::encode_echo_reply(payload, out),
            Request::Procs { k, rank } => match self.procs.reply(k, rank) {
                Ok(reply) => protocol::encode_procs_reply(&reply, out),
                Err(msg) => {
                    let code = if msg.contains("--interval") {
                        ErrorCode::Unsupported
                    } else {
                        ErrorCode::Internal
                    };
                    protocol::encode_error(&ProtocolError::new(code, msg), out)
                }
            },
        }
    }

    /// Stop background work (the procs sampler thread).
    pub fn shutdown(&self) {
        self.procs.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::protocol::{decode_response, Rank, Response};

    #[test]
    fn pipelined_requests_and_a_partial_one() {
        let h = Handler::new(None);
        let mut input = Vec::new();
        protocol::encode_echo_request(b"one", &mut input);
        protocol::encode_procs_request(3, Rank::Total, &mut input);
        let whole = input.len();
        protocol::encode_echo_request(b"three", &mut input);
        input.truncate(input.len() - 2);
        let mut out = Vec::new();
        assert_eq!(
            h.handle(&input, &mut out),
            Handled {
                consumed: whole,
                close: false
            }
        );
        let Decoded::Frame(Response::Echo(p), used) = decode_response(&out) else {
            panic!()
        };
        assert_eq!(p, b"one");
        let Decoded::Frame(Response::Procs(r), _) = decode_response(&out[used..]) else {
            panic!()
        };
        assert!(r.entries.len() <= 3);
        assert!(r.entries.windows(2).all(|w| w[0].ranked_ticks >= w[1].ranked_ticks));
    }

    #[test]
    fn garbage_gets_an_error_and_close() {
        let h = Handler::new(None);
        let mut out = Vec::new();
        let done = h.handle(b"garbage!", &mut out);
        assert!(done.close);
        assert!(matches!(decode_response(&out), Decoded::Frame(Response::Error(_), _)));
        let mut out = Vec::new();
        let mut req = Vec::new();
        protocol::encode_procs_request(2, Rank::Interval, &mut req);
        h.handle(&req, &mut out);
        let Decoded::Frame(Response::Error(e), _) = decode_response(&out) else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::Unsupported);
    }
}
