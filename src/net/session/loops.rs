//! Loops more than one workload runs on a TCP data connection, so each is written once:
//! answering requests (rr's server, load's probe server) and moving bulk data one way until
//! the session ends (load's flows, both ends; a sink's server).

use super::meter::{Meter, Metered};
use crate::net::control::ThreadTally;
use crate::net::mode::{Receiver, RecvCounts, Sender};
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long a zero-copy sender may wait for its buffers back at the end of a loop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What an answering loop counted.
pub(crate) struct Answered {
    /// Transactions answered inside the window.
    pub transactions: u64,
    pub metered: Metered,
    pub recv_counts: RecvCounts,
}

/// Answer every request on `stream` with a response until the client closes it; `moved` is
/// told the bytes of every transaction (the byte budget). The client's receiving half ends
/// at the EOF this sends at the end.
pub(crate) fn answer(
    mut meter: Meter<'_>,
    stream: &TcpStream,
    (mut receiver, mut sender): (Box<dyn Receiver>, Box<dyn Sender>),
    transaction_bytes: u64,
    moved: &dyn Fn(u64),
) -> io::Result<Answered> {
    let fd = stream.as_raw_fd();
    let (mut seq, mut transactions) = (0u64, 0u64);
    loop {
        let open = meter.tick(|| receiver.counts().syscalls + sender.counts().syscalls);
        if !receiver.recv(fd, seq)? {
            break;
        }
        sender.send(fd, seq)?;
        moved(transaction_bytes);
        if open {
            transactions += 1;
        }
        seq += 1;
    }
    sender.drain(fd, DRAIN_TIMEOUT)?;
    stream.shutdown(Shutdown::Write).ok();
    Ok(Answered {
        transactions,
        metered: meter.finish(receiver.counts().syscalls + sender.counts().syscalls),
        recv_counts: receiver.counts(),
    })
}

/// One end of a bulk flow.
pub(crate) enum Bulk {
    Send(Box<dyn Sender>),
    Recv(Box<dyn Receiver>),
}

/// What a bulk loop moved inside its window, and its meter's reading.
pub(crate) struct Moved {
    pub tally: ThreadTally,
    pub metered: Metered,
    /// A receiver's counts over the whole flow (None: a sender).
    pub recv_counts: Option<RecvCounts>,
}

/// Move `size`-byte messages on `stream` one way: a sender until `stop()` (then it waits for
/// its zero-copy buffers and closes its half), a receiver until the peer closes. `moved` is
/// told every message's bytes (the byte budget); the tally counts those inside the window. A
/// receive that times out while the peer is silent (a flow not started yet) is retried until
/// `stop()`: a peer that is gone is found by the session (its control connection), which
/// shuts the connection down under the loop.
pub(crate) fn bulk(
    mut meter: Meter<'_>,
    stream: &TcpStream,
    mut end: Bulk,
    size: u64,
    stop: &dyn Fn() -> bool,
    moved: &dyn Fn(u64),
) -> io::Result<Moved> {
    let fd = stream.as_raw_fd();
    let syscalls = |end: &Bulk| match end {
        Bulk::Send(s) => s.counts().syscalls,
        Bulk::Recv(r) => r.counts().syscalls,
    };
    let (mut seq, mut tally) = (0u64, ThreadTally::default());
    loop {
        let open = meter.tick(|| syscalls(&end));
        let more = match &mut end {
            Bulk::Send(sender) => !stop() && sender.send(fd, seq).map(|()| true)?,
            Bulk::Recv(receiver) => match receiver.recv(fd, seq) {
                Ok(more) => more,
                Err(e) if timed_out(&e) && !stop() => continue,
                Err(e) => return Err(e),
            },
        };
        if !more {
            break;
        }
        moved(size);
        if open {
            tally.bytes += size;
            tally.messages += 1;
        }
        seq += 1;
    }
    if let Bulk::Send(sender) = &mut end {
        sender.drain(fd, DRAIN_TIMEOUT)?;
        stream.shutdown(Shutdown::Write).ok();
    }
    let metered = meter.finish(syscalls(&end));
    tally.syscalls = metered.syscalls;
    Ok(Moved {
        tally,
        metered,
        recv_counts: match &end {
            Bulk::Recv(r) => Some(r.counts()),
            Bulk::Send(_) => None,
        },
    })
}

fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}
