//! One server-side connection: its input and output buffers around the shared handler, and
//! the two ways models drive it (blocking reads and writes, or readiness-driven pumping).

use super::admission::{Gauge, Slot, Standing};
use super::handler::{Handler, ServerStats};
use super::server::ServerCtx;
use super::window::ThreadWindow;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Output above this stops reading from the peer until it drains (a client that sends but
/// never reads cannot make the server buffer without bound).
const OUTPUT_LIMIT: usize = 4 << 20;
/// How often a blocked server thread wakes to check the stop flag, the idle timeout and the
/// measurement window.
pub const TICK: Duration = Duration::from_millis(100);
/// A peer that does not read a reply for this long is dropped (blocking models).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Scratch buffer size for one read.
pub const READ_CHUNK: usize = 64 << 10;

/// A read buffer of READ_CHUNK bytes on a page boundary: the kernel copies requests into it,
/// and that copy is slower into a buffer misaligned with its pages (docs/methodology.md,
/// "Where buffers start").
pub fn read_buffer() -> crate::sys::aligned::AlignedBuf {
    crate::sys::aligned::AlignedBuf::zeroed(READ_CHUNK, crate::sys::mem::page_size(), 0)
}

/// A connection's protocol state, independent of how its bytes move.
pub struct Session {
    input: Vec<u8>,
    output: Vec<u8>,
    out_pos: usize,
    /// A bad frame was answered: close once the output is flushed.
    pub closing: bool,
    /// The peer closed its side: answer what was received, then close.
    pub peer_closed: bool,
    last_active: Instant,
    /// When the partial frame waiting in `input` began arriving (None: no partial frame).
    pub frame_started: Option<Instant>,
    /// When the connection was admitted (its turn began, for the iterative model).
    admitted: Instant,
    /// Where admission reads this session's progress (its slot's; none in unit tests).
    gauge: Option<Arc<Gauge>>,
}

impl Session {
    pub fn new() -> Session {
        Session {
            input: Vec::new(),
            output: Vec::new(),
            out_pos: 0,
            closing: false,
            peer_closed: false,
            last_active: Instant::now(),
            frame_started: None,
            admitted: Instant::now(),
            gauge: None,
        }
    }

    /// The session of the connection holding `slot`, publishing its progress to admission.
    pub fn for_slot(slot: &Slot) -> Session {
        Session {
            gauge: Some(slot.gauge()),
            ..Session::new()
        }
    }

    /// Where the partial frame stands and whether a reply is owed (what admission judges).
    pub fn standing(&self) -> Standing {
        Standing {
            frame_started: self.frame_started,
            frame_bytes: self.input.len(),
            frame_needs: super::protocol::frame_needs(&self.input),
            last_active: self.last_active,
            owes: !self.pending().is_empty(),
        }
    }

    fn publish(&self) {
        if let Some(gauge) = &self.gauge {
            gauge.publish(self.standing());
        }
    }

    /// Bytes arrived: answer every whole request they complete.
    pub fn feed(&mut self, bytes: &[u8], handler: &Handler) {
        self.last_active = Instant::now();
        if self.closing {
            return;
        }
        let handled = if self.input.is_empty() {
            // Common case: handle straight from the read buffer, keep only a partial tail.
            let h = handler.handle(bytes, &mut self.output);
            self.input.extend_from_slice(&bytes[h.consumed..]);
            h
        } else {
            self.input.extend_from_slice(bytes);
            let h = handler.handle(&self.input, &mut self.output);
            self.input.drain(..h.consumed);
            h
        };
        if handled.close {
            self.closing = true;
            self.input = Vec::new();
        }
        if self.input.is_empty() {
            self.frame_started = None;
        } else if self.frame_started.is_none() {
            self.frame_started = Some(self.last_active);
        }
        self.publish();
    }

    pub fn pending(&self) -> &[u8] {
        &self.output[self.out_pos..]
    }

    pub fn advance(&mut self, n: usize) {
        self.out_pos += n;
        if self.out_pos >= self.output.len() {
            self.output.clear();
            self.out_pos = 0;
        }
        self.last_active = Instant::now();
        self.publish();
    }

    /// Take the whole pending output (for completion-based sends that own their buffer).
    pub fn take_output(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.output);
        if self.out_pos > 0 {
            out.drain(..self.out_pos);
            self.out_pos = 0;
        }
        out
    }

    /// A completion-based send finished: give back its buffer's unsent tail in front of
    /// anything queued since.
    pub fn sent(&mut self, mut unsent: Vec<u8>) {
        self.last_active = Instant::now();
        if !unsent.is_empty() {
            unsent.extend_from_slice(self.pending());
            self.output = unsent;
            self.out_pos = 0;
        }
        self.publish();
    }

    pub fn wants_read(&self) -> bool {
        !self.closing && !self.peer_closed && self.pending().len() < OUTPUT_LIMIT
    }

    /// Nothing more will be read and nothing is left to send.
    pub fn finished(&self) -> bool {
        (self.closing || self.peer_closed) && self.pending().is_empty()
    }

    pub fn idle_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_active)
    }

    /// How long the connection has been served.
    pub fn turn_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.admitted)
    }
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

/// A non-blocking socket with its session, for readiness-based models.
pub struct Conn {
    // Fields drop in order: the place under --max-conns is given back before the socket
    // closes, so a client that reconnects the moment it sees the close is not told "full".
    _slot: Slot,
    pub stream: TcpStream,
    pub session: Session,
}

/// Whether a connection stays after being pumped.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    Open,
    Close,
}

impl Conn {
    pub fn new(stream: TcpStream, slot: Slot) -> io::Result<Conn> {
        stream.set_nonblocking(true)?;
        Ok(Conn {
            session: Session::for_slot(&slot),
            _slot: slot,
            stream,
        })
    }

    /// Write what is pending until done or the socket is full.
    fn flush(&mut self, handler: &Handler) -> Result<(), ()> {
        while !self.session.pending().is_empty() {
            match self.stream.write(self.session.pending()) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    ServerStats::bump(&handler.stats.bytes_out, n as u64);
                    self.session.advance(n)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    ServerStats::bump(&handler.stats.io_errors, 1);
                    return Err(());
                }
            }
        }
        Ok(())
    }

    /// Move bytes both ways. With `drain` (edge-triggered readiness) read and write until the
    /// socket would block; without it, one read per call (level-triggered: the poller reports
    /// the socket again while data remains).
    pub fn pump(&mut self, handler: &Handler, scratch: &mut [u8], drain: bool) -> Progress {
        loop {
            if self.flush(handler).is_err() {
                return Progress::Close;
            }
            if self.session.finished() {
                return Progress::Close;
            }
            if !self.session.wants_read() {
                return Progress::Open;
            }
            match self.stream.read(scratch) {
                Ok(0) => self.session.peer_closed = true,
                Ok(n) => {
                    ServerStats::bump(&handler.stats.bytes_in, n as u64);
                    self.session.feed(&scratch[..n], handler)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    ServerStats::bump(&handler.stats.io_errors, 1);
                    return Progress::Close;
                }
            }
            if !drain {
                if self.flush(handler).is_err() || self.session.finished() {
                    return Progress::Close;
                }
                return Progress::Open;
            }
        }
    }
}

/// Serve one connection with blocking calls until it closes, goes idle, is too slow to send a
/// frame, or the server stops (replies to requests already received are still sent). Used by
/// the iterative, thread per connection models; `others_waiting` says whether other clients
/// wait for this thread (iterative), which shortens the idle timeout as a full server does.
pub fn serve_blocking(
    stream: TcpStream,
    slot: Slot,
    ctx: &ServerCtx,
    window: &mut ThreadWindow<'_>,
    scratch: &mut [u8],
    others_waiting: &dyn Fn() -> bool,
) {
    let handler = &ctx.handler;
    if stream.set_read_timeout(Some(TICK)).is_err() || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return;
    }
    let mut stream = stream;
    // Declared after the stream, so dropped before it: the place under --max-conns is given
    // back before the socket closes (a client reconnecting at once is not told "full").
    let mut session = Session::for_slot(&slot);
    let _slot = slot;
    loop {
        window.tick();
        while !session.pending().is_empty() {
            match stream.write(session.pending()) {
                Ok(0) => return,
                Ok(n) => {
                    ServerStats::bump(&handler.stats.bytes_out, n as u64);
                    session.advance(n)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Includes the write timeout: a peer that stopped reading.
                    ServerStats::bump(&handler.stats.io_errors, 1);
                    return;
                }
            }
        }
        if session.finished() || ctx.stop_requested() {
            return;
        }
        // Every reply sent: a client asking without pause never lets the read time out either,
        // and its turn may be over (the per-address cap; a measured server skips the check).
        if ctx.config.per_address && ctx.expired(&session, Instant::now(), others_waiting) {
            return;
        }
        match stream.read(scratch) {
            Ok(0) => session.peer_closed = true,
            Ok(n) => {
                ServerStats::bump(&handler.stats.bytes_in, n as u64);
                session.feed(&scratch[..n], handler);
                // A client trickling a frame never lets the read time out: check here too (the
                // backlog waiting behind it included: the iterative model serves one at a time).
                if session.frame_started.is_some() && ctx.expired(&session, Instant::now(), others_waiting) {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if ctx.expired(&session, Instant::now(), others_waiting) {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                ServerStats::bump(&handler.stats.io_errors, 1);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::protocol;

    #[test]
    fn session_keeps_partial_frames_and_unsent_output() {
        let h = Handler::new(None);
        let mut s = Session::new();
        let mut req = Vec::new();
        protocol::encode_echo_request(b"abcdef", &mut req);
        s.feed(&req[..5], &h);
        assert!(s.pending().is_empty());
        s.feed(&req[5..], &h);
        assert_eq!(s.pending().len(), req.len());
        s.advance(3);
        let rest = s.take_output();
        assert_eq!(rest.len(), req.len() - 3);
        s.sent(rest[2..].to_vec());
        assert_eq!(s.pending().len(), req.len() - 5);
        assert!(!s.finished());
        s.peer_closed = true;
        s.advance(s.pending().len());
        assert!(s.finished());
    }
}
