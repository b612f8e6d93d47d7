//! The request/response protocol every server model speaks (documented in docs/protocol.md).
//!
//! A frame is an 8-byte header followed by a payload:
//! `b"io"` magic (2 bytes), version (1 byte), kind (1 byte), payload length (u32, big endian).
//! Requests: `echo` (the payload comes back unchanged) and `procs` (the top-k CPU consumers).
//! Anything malformed gets an `error` frame and the connection is closed after it.

pub const MAGIC: [u8; 2] = *b"io";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 8;
/// The largest payload either side accepts; a longer declared length is refused unread.
pub const MAX_PAYLOAD: usize = 1 << 20;

pub const KIND_ECHO: u8 = 0x01;
pub const KIND_PROCS: u8 = 0x02;
pub const KIND_ECHO_REPLY: u8 = 0x81;
pub const KIND_PROCS_REPLY: u8 = 0x82;
pub const KIND_ERROR: u8 = 0xE0;

/// Why a frame was refused; the code travels in the error frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    BadMagic = 1,
    BadVersion = 2,
    UnknownKind = 3,
    TooLarge = 4,
    BadPayload = 5,
    ServerFull = 6,
    Unsupported = 7,
    Internal = 8,
}

impl ErrorCode {
    pub fn from_u16(v: u16) -> Option<ErrorCode> {
        use ErrorCode::*;
        [
            BadMagic,
            BadVersion,
            UnknownKind,
            TooLarge,
            BadPayload,
            ServerFull,
            Unsupported,
            Internal,
        ]
        .into_iter()
        .find(|c| *c as u16 == v)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadMagic => "bad-magic",
            ErrorCode::BadVersion => "bad-version",
            ErrorCode::UnknownKind => "unknown-kind",
            ErrorCode::TooLarge => "too-large",
            ErrorCode::BadPayload => "bad-payload",
            ErrorCode::ServerFull => "server-full",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Internal => "internal",
        }
    }
}

/// A frame that cannot be accepted: the code and a sentence for the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ProtocolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ProtocolError {
        ProtocolError {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

/// How the procs service ranks processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// utime + stime since each process started.
    Total = 0,
    /// CPU ticks used during the server's last sampling interval.
    Interval = 1,
}

/// A request as decoded from a buffer, borrowing the echo payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Echo(&'a [u8]),
    Procs { k: u16, rank: Rank },
}

/// One process in a procs reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcEntry {
    pub pid: u32,
    pub name: String,
    pub user_ticks: u64,
    pub system_ticks: u64,
    /// The ticks it was ranked by: utime+stime, or those used during the interval.
    pub ranked_ticks: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcsReply {
    pub rank: Rank,
    /// The sampling interval behind `Rank::Interval` (0 for `Rank::Total`).
    pub interval_ms: u32,
    /// Clock ticks per second (USER_HZ) that the tick counts are in.
    pub ticks_per_s: u32,
    pub entries: Vec<ProcEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Echo(Vec<u8>),
    Procs(ProcsReply),
    Error(ProtocolError),
}

/// The result of looking at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<T> {
    /// Not a whole frame yet: at least this many bytes in total are needed.
    Incomplete(usize),
    /// A frame and the number of bytes it took.
    Frame(T, usize),
    /// The bytes cannot be a valid frame; answer with this error and close.
    Invalid(ProtocolError),
}

fn put_header(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&(len as u32).to_be_bytes());
}

/// Check a header and return (kind, payload length), or what is wrong with it.
fn parse_header(buf: &[u8]) -> Decoded<(u8, usize)> {
    if buf.len() < HEADER_LEN {
        // Refuse garbage as soon as the magic is visibly wrong.
        let seen = buf.len().min(2);
        if buf[..seen] != MAGIC[..seen] {
            return Decoded::Invalid(ProtocolError::new(
                ErrorCode::BadMagic,
                "frame does not start with \"io\"",
            ));
        }
        return Decoded::Incomplete(HEADER_LEN);
    }
    if buf[..2] != MAGIC {
        return Decoded::Invalid(ProtocolError::new(
            ErrorCode::BadMagic,
            "frame does not start with \"io\"",
        ));
    }
    if buf[2] != VERSION {
        return Decoded::Invalid(ProtocolError::new(
            ErrorCode::BadVersion,
            format!("protocol version {} not supported (this side speaks {VERSION})", buf[2]),
        ));
    }
    let len = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
    if len > MAX_PAYLOAD {
        return Decoded::Invalid(ProtocolError::new(
            ErrorCode::TooLarge,
            format!("payload of {len} bytes exceeds the limit of {MAX_PAYLOAD}"),
        ));
    }
    if buf.len() < HEADER_LEN + len {
        return Decoded::Incomplete(HEADER_LEN + len);
    }
    Decoded::Frame((buf[3], len), HEADER_LEN + len)
}

/// The length of the whole frame a partial one announces: its header's, or the largest frame
/// while the header is not whole yet (it may announce that much).
pub fn frame_needs(partial: &[u8]) -> usize {
    match parse_header(partial) {
        Decoded::Incomplete(needs) if partial.len() >= HEADER_LEN => needs,
        Decoded::Frame(_, needs) => needs,
        _ => HEADER_LEN + MAX_PAYLOAD,
    }
}

pub fn encode_echo_request(payload: &[u8], out: &mut Vec<u8>) {
    put_header(out, KIND_ECHO, payload.len());
    out.extend_from_slice(payload);
}

pub fn encode_procs_request(k: u16, rank: Rank, out: &mut Vec<u8>) {
    put_header(out, KIND_PROCS, 3);
    out.extend_from_slice(&k.to_be_bytes());
    out.push(rank as u8);
}

pub fn encode_echo_reply(payload: &[u8], out: &mut Vec<u8>) {
    put_header(out, KIND_ECHO_REPLY, payload.len());
    out.extend_from_slice(payload);
}

pub fn encode_error(err: &ProtocolError, out: &mut Vec<u8>) {
    let msg = err.message.as_bytes();
    let msg = &msg[..msg.len().min(1024)];
    put_header(out, KIND_ERROR, 2 + msg.len());
    out.extend_from_slice(&(err.code as u16).to_be_bytes());
    out.extend_from_slice(msg);
}

pub fn encode_procs_reply(reply: &ProcsReply, out: &mut Vec<u8>) {
    let mut body = Vec::with_capacity(11 + reply.entries.len() * 48);
    body.push(reply.rank as u8);
    body.extend_from_slice(&reply.interval_ms.to_be_bytes());
    body.extend_from_slice(&reply.ticks_per_s.to_be_bytes());
    body.extend_from_slice(&(reply.entries.len().min(u16::MAX as usize) as u16).to_be_bytes());
    for e in reply.entries.iter().take(u16::MAX as usize) {
        body.extend_from_slice(&e.pid.to_be_bytes());
        body.extend_from_slice(&e.user_ticks.to_be_bytes());
        body.extend_from_slice(&e.system_ticks.to_be_bytes());
        body.extend_from_slice(&e.ranked_ticks.to_be_bytes());
        let name = e.name.as_bytes();
        let name = &name[..name.len().min(255)];
        body.push(name.len() as u8);
        body.extend_from_slice(name);
    }
    put_header(out, KIND_PROCS_REPLY, body.len());
    out.extend_from_slice(&body);
}

/// Decode the request at the front of `buf`.
pub fn decode_request(buf: &[u8]) -> Decoded<Request<'_>> {
    let (kind, len, used) = match parse_header(buf) {
        Decoded::Frame((kind, len), used) => (kind, len, used),
        Decoded::Incomplete(n) => return Decoded::Incomplete(n),
        Decoded::Invalid(e) => return Decoded::Invalid(e),
    };
    let payload = &buf[HEADER_LEN..HEADER_LEN + len];
    match kind {
        KIND_ECHO => Decoded::Frame(Request::Echo(payload), used),
        KIND_PROCS => {
            if len != 3 {
                return Decoded::Invalid(ProtocolError::new(
                    ErrorCode::BadPayload,
                    format!("procs request payload must be 3 bytes, got {len}"),
                ));
            }
            let k = u16::from_be_bytes([payload[0], payload[1]]);
            let rank = match payload[2] {
                0 => Rank::Total,
                1 => Rank::Interval,
                other => {
                    return Decoded::Invalid(ProtocolError::new(
                        ErrorCode::BadPayload,
                        format!("unknown procs rank {other} (0 total, 1 interval)"),
                    ))
                }
            };
            Decoded::Frame(Request::Procs { k, rank }, used)
        }
        other => Decoded::Invalid(ProtocolError::new(
            ErrorCode::UnknownKind,
            format!("unknown request kind 0x{other:02x} (0x01 echo, 0x02 procs)"),
        )),
    }
}

/// A cursor over a reply payload that fails instead of panicking on short input.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes)
    }
}

fn decode_procs_reply(payload: &[u8]) -> Option<ProcsReply> {
    let mut r = Reader { buf: payload };
    let rank = match r.u8()? {
        0 => Rank::Total,
        1 => Rank::Interval,
        _ => return None,
    };
    let interval_ms = r.u32()?;
    let ticks_per_s = r.u32()?;
    let count = r.u16()? as usize;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let pid = r.u32()?;
        let user_ticks = r.u64()?;
        let system_ticks = r.u64()?;
        let ranked_ticks = r.u64()?;
        let name_len = r.u8()? as usize;
        let name = String::from_utf8_lossy(r.take(name_len)?).into_owned();
        entries.push(ProcEntry {
            pid,
            name,
            user_ticks,
            system_ticks,
            ranked_ticks,
        });
    }
    if !r.buf.is_empty() {
        return None;
    }
    Some(ProcsReply {
        rank,
        interval_ms,
        ticks_per_s,
        entries,
    })
}

/// Decode the response at the front of `buf` (client side).
pub fn decode_response(buf: &[u8]) -> Decoded<Response> {
    let (kind, len, used) = match parse_header(buf) {
        Decoded::Frame((kind, len), used) => (kind, len, used),
        Decoded::Incomplete(n) => return Decoded::Incomplete(n),
        Decoded::Invalid(e) => return Decoded::Invalid(e),
    };
    let payload = &buf[HEADER_LEN..HEADER_LEN + len];
    let bad = |what: &str| {
        Decoded::Invalid(ProtocolError::new(
            ErrorCode::BadPayload,
            format!("malformed {what} reply"),
        ))
    };
    match kind {
        KIND_ECHO_REPLY => Decoded::Frame(Response::Echo(payload.to_vec()), used),
        KIND_PROCS_REPLY => match decode_procs_reply(payload) {
            Some(reply) => Decoded::Frame(Response::Procs(reply), used),
            None => bad("procs"),
        },
        KIND_ERROR => {
            if len < 2 {
                return bad("error");
            }
            let code = ErrorCode::from_u16(u16::from_be_bytes([payload[0], payload[1]])).unwrap_or(ErrorCode::Internal);
            let message = String::from_utf8_lossy(&payload[2..]).into_owned();
            Decoded::Frame(Response::Error(ProtocolError { code, message }), used)
        }
        other => Decoded::Invalid(ProtocolError::new(
            ErrorCode::UnknownKind,
            format!("unknown reply kind 0x{other:02x}"),
        )),
    }
}

/// The length of the echo reply frame at the front of `buf`, if a whole one is there: the
/// load generator's fast path, which checks the header without copying the payload.
pub fn peek_frame(buf: &[u8]) -> Decoded<(u8, usize)> {
    parse_header(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn echo_round_trip() {
        let mut buf = Vec::new();
        encode_echo_request(b"hello", &mut buf);
        assert_eq!(&buf[..4], b"io\x01\x01");
        match decode_request(&buf) {
            Decoded::Frame(Request::Echo(p), used) => {
                assert_eq!(p, b"hello");
                assert_eq!(used, buf.len());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(decode_request(&buf[..5]), Decoded::Incomplete(8));
        assert_eq!(decode_request(&buf[..9]), Decoded::Incomplete(13));
    }

    #[test]
    fn procs_round_trip() {
        let mut buf = Vec::new();
        encode_procs_request(2, Rank::Interval, &mut buf);
        assert_eq!(
            decode_request(&buf),
            Decoded::Frame(
                Request::Procs {
                    k: 2,
                    rank: Rank::Interval
                },
                11
            )
        );
        let reply = ProcsReply {
            rank: Rank::Total,
            interval_ms: 0,
            ticks_per_s: 100,
            entries: vec![ProcEntry {
                pid: 7,
                name: "a (b) c".into(),
                user_ticks: 5,
                system_ticks: 6,
                ranked_ticks: 11,
            }],
        };
        let mut out = Vec::new();
        encode_procs_reply(&reply, &mut out);
        assert_eq!(decode_response(&out), Decoded::Frame(Response::Procs(reply), out.len()));
    }

    #[test]
    fn bad_frames_are_refused_with_a_reason() {
        let code = |b: &[u8]| match decode_request(b) {
            Decoded::Invalid(e) => Some(e.code),
            _ => None,
        };
        assert_eq!(code(b"GET / HTTP/1.1\r\n"), Some(ErrorCode::BadMagic));
        assert_eq!(code(b"x"), Some(ErrorCode::BadMagic));
        assert_eq!(code(b"io\x02\x01\0\0\0\0"), Some(ErrorCode::BadVersion));
        assert_eq!(code(b"io\x01\x07\0\0\0\0"), Some(ErrorCode::UnknownKind));
        assert_eq!(code(b"io\x01\x01\xff\xff\xff\xff"), Some(ErrorCode::TooLarge));
        assert_eq!(code(b"io\x01\x02\0\0\0\x01\x05"), Some(ErrorCode::BadPayload));
        assert_eq!(code(b"io\x01\x02\0\0\0\x03\0\x02\x09"), Some(ErrorCode::BadPayload));
        assert_eq!(code(b"io"), None);
    }

    #[test]
    fn error_frames_decode() {
        let mut out = Vec::new();
        encode_error(
            &ProtocolError::new(ErrorCode::ServerFull, "max-conns 2 reached"),
            &mut out,
        );
        match decode_response(&out) {
            Decoded::Frame(Response::Error(e), _) => {
                assert_eq!(e.code, ErrorCode::ServerFull);
                assert_eq!(e.message, "max-conns 2 reached");
            }
            other => panic!("{other:?}"),
        }
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }

        #[test]
        fn echo_payloads_survive(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut buf = Vec::new();
            encode_echo_reply(&payload, &mut buf);
            prop_assert_eq!(decode_response(&buf), Decoded::Frame(Response::Echo(payload.clone()), buf.len()));
        }
    }
}
