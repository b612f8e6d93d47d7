//! The alias probe for net records (`--prove-copies`, net/alias.rs for the method): outside the
//! measured window, on a fresh loopback connection whose receiver does not read, the server's
//! way of sending answers one response from a scratch table filled with the pattern of `seq`;
//! once the call has returned, the bytes it was handed — the transmit buffer for copy-out, the
//! records themselves for gather and zero copy — are overwritten with `seq + 1`'s pattern; then
//! the receiver reads the response and every byte is classified. The case's own table is never
//! touched: it stays immutable while the case runs.

use super::server::Way;
use super::table::Table;
use crate::case::{RecordsCase, RecordsMode};
use crate::net::alias::{classify, ByteTally, MESSAGES_PER_SIZE};
use crate::net::message;
use crate::sys::net as sock;
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The most response bytes probed (a response that does not fit the socket buffers of a
/// receiver that does not read would block the probe).
const MAX_PROBED: u64 = 64 << 10;
const SOCKET_BUFFER: usize = 4 << 20;
const TIMEOUT: Duration = Duration::from_secs(5);

/// Why the probe does not apply to a mode, if it does not.
pub fn not_applicable(mode: RecordsMode) -> Option<&'static str> {
    match mode {
        RecordsMode::UringZc => Some(
            "not applicable to uring-zc: its ring borrows the records until every notification is back, so they cannot be rewritten early; each notification says whether the kernel copied (zerocopy_copied_fraction)",
        ),
        _ => None,
    }
}

/// Probe the case's mode with responses of its records (as many as fit MAX_PROBED, at least one).
pub fn probe(case: &RecordsCase) -> io::Result<ByteTally> {
    let record_size = case.record_size as usize;
    let records = (MAX_PROBED / case.record_size).clamp(1, case.records as u64) as usize;
    let size = records * record_size;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    // Accepted sockets inherit the listener's receive buffer.
    socket2::SockRef::from(&listener).set_recv_buffer_size(SOCKET_BUFFER)?;
    let sender = TcpStream::connect(listener.local_addr()?)?;
    let (mut receiver, _) = listener.accept()?;
    socket2::SockRef::from(&sender).set_send_buffer_size(SOCKET_BUFFER)?;
    sender.set_nodelay(true)?;
    sender.set_write_timeout(Some(TIMEOUT))?;
    receiver.set_read_timeout(Some(TIMEOUT))?;
    let fd = sender.as_raw_fd();
    if case.mode == RecordsMode::ZeroCopy {
        sock::enable_zerocopy(fd)?;
    }
    let ids: Vec<u64> = (0..records as u64).collect();
    let mut scratch = vec![0u8; size];
    let mut received = vec![0u8; size];
    let mut tally = ByteTally::default();
    let mut syscalls = 0;
    for seq in 0..MESSAGES_PER_SIZE {
        message::fill(&mut scratch, seq, 0);
        let table = Table::from_bytes(scratch, record_size);
        let mut way = Way::new(case).map_err(io::Error::other)?;
        way.respond(fd, &table, &ids, &mut syscalls)?;
        // The call has returned: overwrite what it was handed, in place.
        let rewrote_tx = way.rewrite_transmit_buffer(|tx| message::fill(tx, seq + 1, 0));
        drop(way);
        scratch = table.into_bytes();
        if !rewrote_tx {
            message::fill(&mut scratch, seq + 1, 0);
        }
        receiver.read_exact(&mut received)?;
        let t = classify(&received, seq, 0);
        tally.copied += t.copied;
        tally.by_reference += t.by_reference;
        tally.neither += t.neither;
    }
    Ok(tally)
}
