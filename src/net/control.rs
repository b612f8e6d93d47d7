//! The control connection between the two ends of a stream: one JSON object per line.
//! The client says which case to run, the server answers with a session token that tags each
//! data connection, the client announces the measured window, and the server reports what
//! its threads counted. The same protocol drives an in-process loopback server and a remote
//! `iopath net serve`.

use crate::case::StreamCase;
use crate::observation::{Metric, ThreadPlacement};
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// 2: a thread that missed the measured window reports `window_s: null` (1 sent a ~1e-7 s
/// window that inflated the peer's rates).
pub const PROTOCOL_VERSION: u32 = 2;
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    Hello { version: u32, case: StreamCase },
    Ready { token: u64 },
    Refused { error: String },
    Measure,
    Done,
    Report(Box<ServerReport>),
    Failed { error: String },
}

/// A control connection: buffered line reads, unbuffered line writes.
pub struct ControlChannel {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl ControlChannel {
    pub fn new(stream: TcpStream) -> io::Result<ControlChannel> {
        Ok(ControlChannel {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    pub fn send(&mut self, message: &Control) -> io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)
    }

    /// The next message; an error on EOF, timeout or a malformed line.
    pub fn recv(&mut self) -> io::Result<Control> {
        let mut line = String::new();
        let n = Read::take(&mut self.reader, MAX_LINE).read_line(&mut line)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the control connection",
            ));
        }
        if !line.ends_with('\n') && n as u64 == MAX_LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "control message longer than 4 MiB",
            ));
        }
        serde_json::from_str(&line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad control message from the peer: {e}"),
            )
        })
    }

    /// Whether received bytes wait in the buffer (a poll on the socket would not see them).
    pub fn has_buffered(&self) -> bool {
        !self.reader.buffer().is_empty()
    }

    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }

    pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        self.writer.set_read_timeout(timeout)
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
