//! The alias probe (`--prove-copies`): what did the kernel do with the sender's bytes — copy
//! them when the send call ran, or keep a reference to the sender's pages? For the paths
//! without a completion notification (plain send, sendfile, splice) nothing else says.
//!
//! On a fresh loopback TCP pair in this process, with the receiver not reading: the sender
//! sends message `seq` (filled with `seq`'s pattern), then, once the send call has returned,
//! overwrites in place the bytes it handed to the kernel with message `seq + 1`'s pattern
//! (`Sender::rewrite`). Then the receiver reads the message and classifies every byte: `seq`'s
//! pattern (old: copied at send), `seq + 1`'s (new: still referenced, sent by reference), or
//! neither (corrupt). Two patterns never agree on a byte (message.rs), so each byte is one of
//! the three. It shows the state at one moment: a by-reference result means a buffer reused
//! before the kernel lets it go corrupts what the peer receives.

use crate::case::CopyMode;
use crate::net::message;
use crate::net::mode;
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Messages probed per size (each from its own ring slot where the mode has a ring).
pub const MESSAGES_PER_SIZE: u64 = 4;
/// The probed sizes are these, capped at the case's size (small enough that one message fits
/// the socket buffers of a receiver that does not read).
const SIZES: [u64; 2] = [4 << 10, 64 << 10];
/// Socket buffers asked for on both ends (the kernel caps them at wmem_max/rmem_max).
const SOCKET_BUFFER: usize = 4 << 20;
/// A send that cannot finish within this while the receiver does not read did not fit.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How many received bytes were each of the three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteTally {
    /// The old pattern: the kernel copied the bytes when the send call ran.
    pub copied: u64,
    /// The new pattern: the kernel still referenced the sender's bytes after the call.
    pub by_reference: u64,
    /// Neither pattern: corrupted.
    pub neither: u64,
}

impl ByteTally {
    pub fn total(&self) -> u64 {
        self.copied + self.by_reference + self.neither
    }

    /// The fraction of bytes the receiver got by reference; None when nothing was probed.
    pub fn by_reference_fraction(&self) -> Option<f64> {
        (self.total() > 0).then(|| self.by_reference as f64 / self.total() as f64)
    }

    fn add(&mut self, other: ByteTally) {
        self.copied += other.copied;
        self.by_reference += other.by_reference;
        self.neither += other.neither;
    }
}

/// Classify `received`, the bytes from `offset` of message `seq` as they arrived after the
/// sender rewrote its source with message `seq + 1`.
pub fn classify(received: &[u8], seq: u64, offset: u64) -> ByteTally {
    let mut old = vec![0u8; received.len()];
    let mut new = vec![0u8; received.len()];
    message::fill(&mut old, seq, offset);
    message::fill(&mut new, seq + 1, offset);
    let mut tally = ByteTally::default();
    for ((got, old), new) in received.iter().zip(&old).zip(&new) {
        if got == old {
            tally.copied += 1;
        } else if got == new {
            tally.by_reference += 1;
        } else {
            tally.neither += 1;
        }
    }
    tally
}

/// What the probe concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every byte arrived as it was when the send call ran.
    Copied,
    /// Every byte arrived as rewritten after the call: the kernel sent the sender's pages.
    ByReference,
    /// Some of each.
    Partly,
}

impl Verdict {
    /// The verdict for a by-reference fraction.
    pub fn from_fraction(fraction: f64) -> Verdict {
        if fraction <= 0.0 {
            Verdict::Copied
        } else if fraction >= 1.0 {
            Verdict::ByReference
        } else {
            Verdict::Partly
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Copied => "copied",
            Verdict::ByReference => "by reference",
            Verdict::Partly => "partly",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sizes probed for a case of `size` bytes.
pub fn probe_sizes(size: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = SIZES.iter().map(|s| (*s).min(size)).collect();
    sizes.dedup();
    sizes
}

/// Probe `mode` with messages of `fields` fields at every size of `probe_sizes(size)`, over
/// a fresh loopback connection per size. A mode the kernel refuses is the constructor's
/// error (EPERM/ENOSYS/EOPNOTSUPP); a message that does not fit the socket buffers times out.
pub fn probe(mode: CopyMode, size: u64, fields: usize) -> io::Result<ByteTally> {
    let mut tally = ByteTally::default();
    for probe_size in probe_sizes(size) {
        tally.add(probe_one_size(
            mode,
            probe_size as usize,
            fields.min(probe_size as usize),
        )?);
    }
    Ok(tally)
}

fn probe_one_size(mode: CopyMode, size: usize, fields: usize) -> io::Result<ByteTally> {
    let mut sender = mode::sender(mode, size, fields, true)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    // Accepted sockets inherit the listener's receive buffer.
    socket2::SockRef::from(&listener).set_recv_buffer_size(SOCKET_BUFFER)?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (mut server, _) = listener.accept()?;
    let client_ref = socket2::SockRef::from(&client);
    client_ref.set_send_buffer_size(SOCKET_BUFFER)?;
    client.set_nodelay(true)?;
    client.set_write_timeout(Some(SEND_TIMEOUT))?;
    server.set_read_timeout(Some(READ_TIMEOUT))?;
    let fd = client.as_raw_fd();
    let mut received = vec![0u8; size];
    let mut tally = ByteTally::default();
    for seq in 0..MESSAGES_PER_SIZE {
        sender.send(fd, seq).map_err(|e| {
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
                io::Error::new(
                    e.kind(),
                    format!(
                        "a {size}-byte probe message did not fit the socket buffers of a receiver that does not read"
                    ),
                )
            } else {
                e
            }
        })?;
        sender.rewrite(seq)?;
        server.read_exact(&mut received)?;
        tally.add(classify(&received, seq, 0));
    }
    // Zero-copy senders wait for their completions before their buffers go.
    sender.drain(fd, READ_TIMEOUT)?;
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_counts_old_new_and_neither_bytes() {
        let mut got = vec![0u8; 1000];
        message::fill(&mut got, 9, 300);
        assert_eq!(
            classify(&got, 9, 300),
            ByteTally {
                copied: 1000,
                by_reference: 0,
                neither: 0
            }
        );
        message::fill(&mut got[200..700], 10, 500);
        got[999] ^= 0xff;
        let tally = classify(&got, 9, 300);
        assert_eq!(
            tally,
            ByteTally {
                copied: 499,
                by_reference: 500,
                neither: 1
            }
        );
        assert_eq!(tally.by_reference_fraction(), Some(0.5));
        assert_eq!(ByteTally::default().by_reference_fraction(), None);
    }

    #[test]
    fn verdicts_follow_the_fraction() {
        assert_eq!(Verdict::from_fraction(0.0), Verdict::Copied);
        assert_eq!(Verdict::from_fraction(1.0), Verdict::ByReference);
        assert_eq!(Verdict::from_fraction(0.25), Verdict::Partly);
        assert_eq!(Verdict::from_fraction(1e-9), Verdict::Partly);
    }

    #[test]
    fn probe_sizes_are_capped_at_the_case_size() {
        assert_eq!(probe_sizes(1 << 20), vec![4096, 65536]);
        assert_eq!(probe_sizes(1024), vec![1024]);
        assert_eq!(probe_sizes(10_000), vec![4096, 10_000]);
    }

    fn probe_fraction(mode: CopyMode, fields: usize) -> f64 {
        let tally = probe(mode, 64 << 10, fields).unwrap();
        assert_eq!(tally.neither, 0, "{mode}: {tally:?}");
        assert_eq!(tally.total(), MESSAGES_PER_SIZE * (4096 + 65536));
        tally.by_reference_fraction().unwrap()
    }

    /// one-copy and two-copy copy at the send call; MSG_ZEROCOPY pins the pages, but over
    /// loopback the kernel copies them when it delivers to the local socket, which happens
    /// before the call returns. What the sender does afterwards cannot reach the receiver.
    #[test]
    fn one_copy_two_copy_and_zero_copy_are_copied() {
        for mode in [CopyMode::OneCopy, CopyMode::TwoCopy, CopyMode::ZeroCopy] {
            assert_eq!(
                Verdict::from_fraction(probe_fraction(mode, 8)),
                Verdict::Copied,
                "{mode}"
            );
        }
    }

    /// sendfile hands the socket the file's page-cache pages, splice the user pages
    /// vmspliced into the pipe: over loopback the receiver reads those very pages.
    #[test]
    fn sendfile_and_splice_are_by_reference() {
        for mode in [CopyMode::Sendfile, CopyMode::Splice] {
            for fields in [1, 8] {
                assert_eq!(
                    Verdict::from_fraction(probe_fraction(mode, fields)),
                    Verdict::ByReference,
                    "{mode} with {fields} fields"
                );
            }
        }
    }
}
