//! The control connection between the two ends of a stream: one JSON object per line.
//! The client says which case to run, the server answers with a session token that tags each
//! data connection, the client announces the measured window, and the server reports what
//! its threads counted. The same protocol drives an in-process loopback server and a remote
//! `iopath net serve`.

use crate::observation::{Metric, ThreadPlacement};
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// 2: a thread that missed the measured window reports `window_s: null` (1 sent a ~1e-7 s
/// window that inflated the peer's rates). 3: the case names its receive mode (`rx_mode`) and
/// a server may answer `unavailable` when the kernel refuses that mode. 4: an rr/crr case
/// names its receive mode too (a version-3 server would have ignored it and received in the
/// send mode's usual pairing), and an rr/crr server may answer `unavailable`. 5: a stream,
/// rr or crr case names when its receivers are woken (`rx_wake`; a version-4 server would
/// have ignored it and woken them on any data).
pub const PROTOCOL_VERSION: u32 = 5;
/// The oldest client version a server still serves: a version-2 hello has no `rx_mode` and
/// gets the receiver that version always had.
pub const OLDEST_CLIENT_VERSION: u32 = 2;
/// The longest control message accepted (a report of 1024 threads fits many times over).
const MAX_LINE: u64 = 4 << 20;
/// Bytes each data connection sends first: the session token (8) and the thread index (4).
pub const DATA_HEADER_LEN: usize = 12;

/// What one thread counted inside its measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadTally {
    pub bytes: u64,
    pub messages: u64,
    /// How long the thread's window was open; `None` (JSON `null`, always written) when the
    /// thread never saw the window open (e.g. blocked in recv() the whole time): it measured
    /// nothing, and rates are computed over the threads that did.
    pub window_s: Option<f64>,
    pub syscalls: u64,
}

/// The server's account of a session, sent after its threads finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub threads: Vec<ThreadTally>,
    pub metrics: Vec<Metric>,
    pub placement: Vec<ThreadPlacement>,
    pub verified_messages: u64,
    pub corrupt_messages: u64,
    pub warnings: Vec<String>,
}

// A control message is built once per session step and sent as JSON: its in-memory size does
// not matter, and boxing the case would only add indirection at every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    Ready {
        token: u64,
    },
    /// The server will not run the case: `error` in words for the user, `kind` for the
    /// program (absent from an older peer: `other`).
    Refused {
        error: String,
        #[serde(default)]
        kind: RefusalKind,
    },
    /// The server holds a pre-shared key: prove you hold it too (net/auth.rs).
    Challenge {
        nonce: String,
    },
    /// HMAC-SHA256(key, nonce), hex. `nonce`: the client's own nonce, asking the server to
    /// prove that it holds the key too (answered with `proof` before `ready`; an older server
    /// ignores it and a client that requires the proof then refuses it).
    Auth {
        mac: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
    },
    /// The server's answer to the client's nonce: HMAC-SHA256 of both nonces under the key, in
    /// a context of its own (net/auth.rs `server_proof`).
    Proof {
        mac: String,
    },
    /// Agent mode (`net serve --agent`), after `ready` on an `agent` hello: run this network
    /// case as the client against the agent `target` and answer with `agent_result`.
    Run(Box<RunRequest>),
    /// Agent mode: this agent's place in its queue of run requests (how many runs go first,
    /// the one running included); one line per change.
    Queued {
        position: u32,
    },
    /// Agent mode: the run request left the queue and is being run.
    Running,
    /// Agent mode: the client's observation of a run request and both hosts' fingerprints.
    AgentResult(Box<AgentResult>),
    /// Agent mode, after `ready` on an `agent` hello: send this host's fingerprint
    /// (`machine`). What a source agent asks its target before a run.
    Fingerprint,
    /// Agent mode: the answer to `fingerprint`, `sysinfo` of this host.
    Machine(Box<crate::sysinfo::Machine>),
    Measure,
    Done,
    Report(Box<ServerReport>),
    Failed {
        error: String,
    },
    /// The kernel refuses what the case needs (e.g. TCP receive zero-copy): the client reports
    /// the cell as `unavailable: reason` rather than failed. Version 3.
    Unavailable {
        what: String,
        reason: String,
    },
}

/// Why a server refused a session, as the `kind` field of a `refused` message, so a client
/// matches a refusal by kind, never by its text. A kind this version does not know (a newer
/// peer's) and a refusal without a kind (an older peer's) read as `Other`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The server holds a pre-shared key and the client did not prove it holds it.
    Key,
    /// Another session is running, or too many connections are saying hello at once.
    Busy,
    /// Warm-up + window longer than the server's `--max-session`.
    SessionTooLong,
    /// The case fails the server's own checks: its limits, or the memory it would take there.
    Limits,
    /// The server's kernel refuses what the case needs (a socket option, an io_uring op).
    Kernel,
    /// The server could not set the session up (e.g. open its data port).
    SetUp,
    /// The client speaks a protocol version this server does not.
    Version,
    /// Not a hello this server can read, or a workload it does not serve.
    BadHello,
    /// The peer's address (a session's client, an agent's target) is outside the server's
    /// `--allow-peers`.
    NotAllowed,
    /// Agent mode: the target of a run request refused this agent's key or did not prove that
    /// it holds the same key (the third-party leg).
    TargetKey,
    /// Anything else, and a text-only refusal from an older peer.
    #[default]
    #[serde(other)]
    Other,
}

impl RefusalKind {
    /// Every kind, for tests and documentation.
    pub const ALL: [RefusalKind; 11] = [
        RefusalKind::Key,
        RefusalKind::Busy,
        RefusalKind::SessionTooLong,
        RefusalKind::Limits,
        RefusalKind::Kernel,
        RefusalKind::SetUp,
        RefusalKind::Version,
        RefusalKind::BadHello,
        RefusalKind::NotAllowed,
        RefusalKind::TargetKey,
        RefusalKind::Other,
    ];
}

/// How often a wait on the control connection looks at its stop check.
const STOP_SLICE: Duration = Duration::from_millis(20);

/// An I/O error in words that name its cause: a timeout as "timed out after 10 s" (a read
/// timeout surfaces as EAGAIN, "Resource temporarily unavailable (os error 11)"), running out
/// of file descriptors with the limit that was hit.
pub fn describe_io_error(e: &io::Error, waited: Duration) -> String {
    match (e.kind(), e.raw_os_error()) {
        (io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut, _) => {
            format!(
                "timed out after {}",
                crate::format::format_duration_s(waited.as_secs_f64())
            )
        }
        (_, Some(libc::EMFILE)) => {
            let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .map_or("unknown".to_string(), |(soft, _)| soft.to_string());
            format!("too many open files (RLIMIT_NOFILE {limit}; raise it with ulimit -n)")
        }
        (_, Some(libc::ENFILE)) => "the system's file table is full (ENFILE; see /proc/sys/fs/file-max)".to_string(),
        _ => e.to_string(),
    }
}

/// A control connection: buffered line reads, unbuffered line writes. Its read timeout is a
/// deadline for a whole message, not for each read: a peer that trickles one byte a second
/// cannot keep the other end waiting past it.
pub struct ControlChannel {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    read_timeout: Option<Duration>,
    /// When the current wait for the peer began (the last message sent or received).
    waiting_since: Instant,
}

impl ControlChannel {
    pub fn new(stream: TcpStream) -> io::Result<ControlChannel> {
        Ok(ControlChannel {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            read_timeout: None,
            waiting_since: Instant::now(),
        })
    }

    pub fn send(&mut self, message: &Control) -> io::Result<()> {
        self.send_json(message)
    }

    /// Send any serialisable message as one line (a workload's own hello or phase messages).
    pub fn send_json<T: Serialize>(&mut self, message: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        self.waiting_since = Instant::now();
        Ok(())
    }

    /// The next message, whole within the read timeout; an error on EOF, timeout or a
    /// malformed line.
    pub fn recv(&mut self) -> io::Result<Control> {
        let deadline = self.read_timeout.map(|t| Instant::now() + t);
        let line = self.recv_line(deadline, &|| false)?;
        Self::parse(&line)
    }

    /// One line (newline included) by `deadline`; `stopped` is checked every 20 ms and ends
    /// the wait as `ErrorKind::Interrupted`.
    pub fn recv_line(&mut self, deadline: Option<Instant>, stopped: &dyn Fn() -> bool) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            let buffered = self.reader.buffer();
            if let Some(end) = buffered.iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&buffered[..=end]);
                self.reader.consume(end + 1);
                self.waiting_since = Instant::now();
                return Ok(line);
            }
            let n = buffered.len();
            line.extend_from_slice(buffered);
            self.reader.consume(n);
            if line.len() as u64 >= MAX_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "control message longer than 4 MiB",
                ));
            }
            if stopped() {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
            }
            let slice = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) {
                    Some(left) => Some(left.min(STOP_SLICE)),
                    None => return Err(self.timed_out(&line)),
                },
                None => Some(STOP_SLICE),
            };
            self.writer.set_read_timeout(slice)?;
            match self.reader.fill_buf() {
                Ok([]) if line.is_empty() => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the control connection",
                    ))
                }
                Ok([]) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the control connection in the middle of a message",
                    ))
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn timed_out(&self, partial: &[u8]) -> io::Error {
        let waited = describe_io_error(&io::ErrorKind::TimedOut.into(), self.waiting_since.elapsed());
        let what = if partial.is_empty() {
            "no message from the peer".to_string()
        } else {
            format!("only {} bytes of a message from the peer", partial.len())
        };
        io::Error::new(io::ErrorKind::TimedOut, format!("{what}: {waited}"))
    }

    /// Decode one control line. The peer's words (a refusal, a failure, an unavailable
    /// feature's reason, a decoding error quoting them) pass a control-character filter here,
    /// so every error line that quotes them is safe to print on a terminal.
    pub fn parse(line: &[u8]) -> io::Result<Control> {
        let clean = |text: &str| crate::format::escape_control(text).into_owned();
        let message = serde_json::from_slice(line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad control message from the peer: {}", clean(&e.to_string())),
            )
        })?;
        Ok(match message {
            Control::Refused { error, kind } => Control::Refused {
                error: clean(&error),
                kind,
            },
            Control::Failed { error } => Control::Failed { error: clean(&error) },
            Control::Unavailable { what, reason } => Control::Unavailable {
                what: clean(&what),
                reason: clean(&reason),
            },
            other => other,
        })
    }

    /// Whether received bytes wait in the buffer (a poll on the socket would not see them).
    pub fn has_buffered(&self) -> bool {
        !self.reader.buffer().is_empty()
    }

    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }

    /// The deadline each `recv` gives a whole message (None: wait for ever).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a zero timeout"));
        }
        self.read_timeout = timeout;
        Ok(())
    }
}

/// Why a first control line is not a hello this server can serve.
#[derive(Debug, Clone, PartialEq)]
pub enum HelloError {
    /// The client speaks another protocol version: answer it in words it can show.
    Version(String),
    /// Not a hello, or not one this version can read.
    Malformed(String),
}

/// A controller's request to an agent: run `case` (`net stream`, `net rr` or `net crr`) as the
/// client against the agent at `target` (`HOST:PORT`). The case's endpoint is replaced by the
/// target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub target: String,
    pub case: crate::case::Case,
}

/// An agent's answer to a run request: the client's whole observation and both hosts'
/// fingerprints (`source`: the agent that ran the client; `destination`: its target, as the
/// target sent it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    pub observation: crate::observation::Observation,
    pub source: crate::sysinfo::Machine,
    pub destination: crate::sysinfo::Machine,
}

/// The hello of a controller, or of an agent asking its target for a fingerprint:
/// `{"type":"hello","version":4,"workload":"agent"}`. Nothing else: the request follows once
/// the key is proven both ways.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentHello {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub workload: String,
}

impl Default for AgentHello {
    fn default() -> Self {
        AgentHello {
            kind: "hello".into(),
            version: PROTOCOL_VERSION,
            workload: "agent".into(),
        }
    }
}

/// Read a client's first control line as a hello's envelope: its type and protocol version
/// checked before the rest is decoded, so a client of another version hears "protocol version
/// 99, this server speaks 2", not a decoding error about a field it has renamed. The
/// `workload` it names (absent: a stream-only client's hello), for the session server to find
/// the entry that decodes the rest (`net::session::served::decode_hello`).
pub fn parse_envelope(line: &[u8]) -> Result<Option<serde_json::Value>, HelloError> {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(rename = "type")]
        kind: Option<serde_json::Value>,
        version: Option<serde_json::Value>,
        workload: Option<serde_json::Value>,
    }
    let envelope: Envelope = serde_json::from_slice(line)
        .map_err(|e| HelloError::Malformed(format!("not a control message (JSON): {e}")))?;
    if envelope.kind != Some(serde_json::Value::from("hello")) {
        return Err(HelloError::Malformed(format!(
            "expected a hello, got a message of type {}",
            envelope.kind.map_or("(none)".to_string(), |k| k.to_string())
        )));
    }
    match envelope.version {
        Some(v)
            if v.as_u64()
                .is_some_and(|v| (OLDEST_CLIENT_VERSION as u64..=PROTOCOL_VERSION as u64).contains(&v)) =>
        {
            Ok(envelope.workload)
        }
        Some(v) => Err(HelloError::Version(format!(
            "protocol version {v}, this server speaks {OLDEST_CLIENT_VERSION} to {PROTOCOL_VERSION}"
        ))),
        None => Err(HelloError::Version(format!(
            "a hello without a protocol version, this server speaks {PROTOCOL_VERSION}"
        ))),
    }
}

pub fn encode_data_header(token: u64, index: u32) -> [u8; DATA_HEADER_LEN] {
    let mut header = [0u8; DATA_HEADER_LEN];
    header[..8].copy_from_slice(&token.to_le_bytes());
    header[8..].copy_from_slice(&index.to_le_bytes());
    header
}

pub fn decode_data_header(header: &[u8; DATA_HEADER_LEN]) -> (u64, u32) {
    let mut token = [0u8; 8];
    token.copy_from_slice(&header[..8]);
    let mut index = [0u8; 4];
    index.copy_from_slice(&header[8..]);
    (u64::from_le_bytes(token), u32::from_le_bytes(index))
}

/// What a request/response client (rr, crr, udp-rr) says after `ready`: the window opens (`measure`), closes (`done`),
/// and its threads are finished (`finished`: a crr server stops accepting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum RrPhase {
    Measure,
    Done,
    Finished,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From review: a peer sending bytes without a newline grew the reader without bound.
    #[test]
    fn an_endless_control_line_is_refused() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let mut peer = TcpStream::connect(addr).unwrap();
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..5 {
                if peer.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        let (stream, _) = listener.accept().unwrap();
        let mut channel = ControlChannel::new(stream).unwrap();
        let err = channel.recv().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        drop(channel);
        writer.join().unwrap();
    }

    #[test]
    fn the_version_is_checked_before_the_rest_of_the_hello() {
        let other = br#"{"type":"hello","version":99,"case":{"renamed":true}}"#;
        assert_eq!(
            parse_envelope(other),
            Err(HelloError::Version(format!(
                "protocol version 99, this server speaks {OLDEST_CLIENT_VERSION} to {PROTOCOL_VERSION}"
            )))
        );
        assert!(matches!(
            parse_envelope(b"GET / HTTP/1.1"),
            Err(HelloError::Malformed(_))
        ));
        let current = format!(r#"{{"type":"hello","version":{PROTOCOL_VERSION},"workload":"rr","case":{{}}}}"#);
        assert_eq!(
            parse_envelope(current.as_bytes()),
            Ok(Some(serde_json::Value::from("rr")))
        );
        assert!(matches!(
            parse_envelope(br#"{"type":"hello","version":1,"case":{}}"#),
            Err(HelloError::Version(_))
        ));
    }

    /// A peer trickling one byte every 50 ms never lets a read time out: the deadline is for
    /// the whole message.
    #[test]
    fn a_trickled_message_times_out_at_the_deadline() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = std::thread::spawn({
            let done = done.clone();
            move || {
                let mut peer = TcpStream::connect(addr).unwrap();
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    if peer.write_all(b" ").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        });
        let (stream, _) = listener.accept().unwrap();
        let mut channel = ControlChannel::new(stream).unwrap();
        channel.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
        let started = Instant::now();
        let err = channel.recv().unwrap_err();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("timed out after"), "{err}");
        // A per-read timeout would never fire while the peer trickles (until `done`): any
        // bound tells the two apart, so it is generous for a loaded machine.
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        drop(channel);
        writer.join().unwrap();
    }

    #[test]
    fn header_round_trip() {
        let h = encode_data_header(0xdead_beef_1234, 7);
        assert_eq!(decode_data_header(&h), (0xdead_beef_1234, 7));
    }

    /// A thread without a window is `null` on the wire, never a number a peer could average.
    #[test]
    fn a_missing_window_is_null_on_the_wire() {
        let idle = ThreadTally::default();
        let text = serde_json::to_string(&idle).unwrap();
        assert!(text.contains("\"window_s\":null"), "{text}");
        assert_eq!(serde_json::from_str::<ThreadTally>(&text).unwrap().window_s, None);
        let busy = ThreadTally {
            window_s: Some(1.5),
            ..Default::default()
        };
        let text = serde_json::to_string(&busy).unwrap();
        assert_eq!(serde_json::from_str::<ThreadTally>(&text).unwrap(), busy);
    }

    #[test]
    fn control_messages_round_trip_as_json() {
        let m = Control::Failed { error: "x".into() };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Control>(&text).unwrap(), m);
        assert!(text.contains("\"type\":\"failed\""));
    }
}
