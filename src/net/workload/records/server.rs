//! One server thread: read requests naming N record ids from its connection and answer each
//! with those N records from the table, in the case's mode, counting only inside the window.

use super::table::Table;
use super::{recv_exact, send_all, Side, SideOutcome, Snapshot, ThreadStart};
use crate::case::{RecordsCase, RecordsMode};
use crate::net::completions::{CompletionCounts, CompletionTracker};
use crate::observation::Role;
use crate::sys::net as sock;
use crate::sys::uring_gather_zc::{GatherZcRing, SetupError};
use crate::sys::zerocopy::{self, ErrQueueRead};
use std::io::{self, IoSlice};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Read the error queue once this many zero-copy calls are waiting for their notification, so
/// that notifications never pile up to the socket's option-memory limit (ENOBUFS).
const REAP_AT: u64 = 64;
/// How long the server waits for the kernel to give back every page at the end.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// SQEs of a uring-zc server thread's ring: one op is in flight at a time.
pub const URING_ENTRIES: u32 = 8;

/// Which way the records of one response reach the kernel, with the state each way needs.
pub(super) enum Way<'t> {
    CopyOut {
        tx: crate::sys::aligned::AlignedBuf,
    },
    Gather {
        iov: Vec<IoSlice<'t>>,
    },
    ZeroCopy {
        iov: Vec<IoSlice<'t>>,
        tracker: CompletionTracker,
        enobufs: u64,
    },
    UringZc {
        ring: Box<GatherZcRing<'t>>,
        bufs: Vec<&'t [u8]>,
    },
}

/// Read every zero-copy notification queued now; with `wait`, first block up to that long.
fn reap(fd: RawFd, tracker: &mut CompletionTracker, syscalls: &mut u64, wait: Option<Duration>) -> io::Result<()> {
    if let Some(wait) = wait {
        *syscalls += 1;
        zerocopy::wait_errqueue(fd, wait.as_millis().min(i32::MAX as u128) as i32)?;
    }
    loop {
        *syscalls += 1;
        match zerocopy::read_errqueue(fd)? {
            ErrQueueRead::Completion(n) => tracker.complete(n.first, n.last, n.copied),
            ErrQueueRead::Empty => return Ok(()),
            ErrQueueRead::Other { origin, errno } => {
                return Err(io::Error::other(format!(
                    "socket error on the error queue (origin {origin}): {}",
                    io::Error::from_raw_os_error(errno as i32)
                )))
            }
        }
    }
}

fn in_flight(tracker: &CompletionTracker) -> u64 {
    tracker.counts.sends - tracker.counts.completed
}

/// What one sendmsg call of a response did.
enum Sent {
    /// It queued data (zero copy: it took the next notification id).
    Data,
    /// ENOBUFS: the callback may free option memory and return Ok to retry.
    NoBuffers,
}

/// sendmsg the whole gather list, continuing after partial sends; `on` sees every call.
fn sendmsg_all(
    fd: RawFd,
    iov: &mut [IoSlice<'_>],
    flags: i32,
    syscalls: &mut u64,
    mut on: impl FnMut(Sent, &mut u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut rest: &mut [IoSlice<'_>] = iov;
    while !rest.is_empty() {
        *syscalls += 1;
        match sock::sendmsg(fd, rest, flags) {
            Ok(n) => {
                on(Sent::Data, syscalls)?;
                IoSlice::advance_slices(&mut rest, n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => on(Sent::NoBuffers, syscalls)?,
            Err(e) => return Err(io::Error::new(e.kind(), format!("sendmsg failed: {e}"))),
        }
    }
    Ok(())
}

impl<'t> Way<'t> {
    pub(super) fn new(case: &RecordsCase) -> anyhow::Result<Way<'t>> {
        Ok(match case.mode {
            RecordsMode::CopyOut => Way::CopyOut {
                tx: crate::net::message::buffer(case.response_bytes() as usize, case.align),
            },
            RecordsMode::Gather => Way::Gather {
                iov: Vec::with_capacity(case.records),
            },
            RecordsMode::ZeroCopy => Way::ZeroCopy {
                iov: Vec::with_capacity(case.records),
                tracker: CompletionTracker::default(),
                enobufs: 0,
            },
            // The coordinator checked that the kernel takes SENDMSG_ZC before any thread started.
            RecordsMode::UringZc => Way::UringZc {
                ring: Box::new(GatherZcRing::new(URING_ENTRIES).map_err(|e| match e {
                    SetupError::Refused(reason) => anyhow::anyhow!("io_uring SENDMSG_ZC refused: {reason}"),
                    SetupError::Failed(e) => anyhow::anyhow!("io_uring setup failed: {e}"),
                })?),
                bufs: Vec::with_capacity(case.records),
            },
        })
    }

    /// Send the records `ids` as one response; returns the bytes user space copied.
    pub(super) fn respond(&mut self, fd: RawFd, table: &'t Table, ids: &[u64], syscalls: &mut u64) -> io::Result<u64> {
        match self {
            Way::CopyOut { tx } => {
                let size = tx.len() / ids.len().max(1);
                for (slot, id) in tx.chunks_exact_mut(size).zip(ids) {
                    slot.copy_from_slice(table.record(*id));
                }
                send_all(fd, tx, syscalls)?;
                Ok(tx.len() as u64)
            }
            Way::Gather { iov } => {
                iov.clear();
                iov.extend(ids.iter().map(|id| IoSlice::new(table.record(*id))));
                sendmsg_all(fd, iov, sock::MSG_NOSIGNAL, syscalls, |sent, _| match sent {
                    Sent::Data => Ok(()),
                    Sent::NoBuffers => Err(io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        "sendmsg: no buffer space (ENOBUFS)",
                    )),
                })?;
                Ok(0)
            }
            Way::ZeroCopy { iov, tracker, enobufs } => {
                iov.clear();
                iov.extend(ids.iter().map(|id| IoSlice::new(table.record(*id))));
                let mut consecutive = 0u32;
                sendmsg_all(
                    fd,
                    iov,
                    sock::MSG_ZEROCOPY | sock::MSG_NOSIGNAL,
                    syscalls,
                    |sent, syscalls| {
                        match sent {
                            Sent::Data => {
                                tracker.record_send();
                                consecutive = 0;
                            }
                            Sent::NoBuffers => {
                                // Option memory (optmem_max) or RLIMIT_MEMLOCK exhausted:
                                // reading the notifications frees it.
                                *enobufs += 1;
                                consecutive += 1;
                                if consecutive > 1000 {
                                    return Err(io::Error::other(
                                        "MSG_ZEROCOPY kept failing with ENOBUFS for 10 s; raise net.core.optmem_max or RLIMIT_MEMLOCK",
                                    ));
                                }
                                reap(fd, tracker, syscalls, Some(Duration::from_millis(10)))?;
                            }
                        }
                        Ok(())
                    },
                )?;
                if in_flight(tracker) >= REAP_AT {
                    reap(fd, tracker, syscalls, None)?;
                }
                Ok(0)
            }
            Way::UringZc { ring, bufs } => {
                bufs.clear();
                bufs.extend(ids.iter().map(|id| table.record(*id)));
                let before = ring.counts.enters;
                let sent = ring.send(fd, bufs);
                *syscalls += ring.counts.enters - before;
                sent.map_err(|e| io::Error::new(e.kind(), format!("io_uring SENDMSG_ZC failed: {e}")))?;
                Ok(0)
            }
        }
    }

    /// Copy-out: apply `rewrite` to the transmit buffer (the bytes its send call was handed)
    /// and say so; the other ways were handed the records themselves (false).
    pub(super) fn rewrite_transmit_buffer(&mut self, rewrite: impl FnOnce(&mut [u8])) -> bool {
        match self {
            Way::CopyOut { tx } => {
                rewrite(tx);
                true
            }
            _ => false,
        }
    }

    /// Wait until the kernel holds none of the table's pages (zero copy); a no-op otherwise.
    fn drain(&mut self, fd: RawFd, syscalls: &mut u64) -> io::Result<()> {
        if let Way::UringZc { ring, .. } = self {
            let before = ring.counts.enters;
            let drained = ring.drain(DRAIN_TIMEOUT);
            *syscalls += ring.counts.enters - before;
            return drained;
        }
        let Way::ZeroCopy { tracker, .. } = self else {
            return Ok(());
        };
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        reap(fd, tracker, syscalls, None)?;
        while in_flight(tracker) > 0 {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} zero-copy completions still missing after {DRAIN_TIMEOUT:?}",
                        in_flight(tracker)
                    ),
                ));
            }
            reap(fd, tracker, syscalls, Some(Duration::from_millis(50)))?;
        }
        Ok(())
    }
}

/// Serve one connection until the client closes it. Requests are [seq u64][N ids u64], little
/// endian; an id outside the table is a protocol error.
pub fn serve(start: ThreadStart<'_>, case: &RecordsCase, table: &Table, fd: RawFd) -> anyhow::Result<SideOutcome> {
    let mut side = Side::begin(start, Role::Server)?;
    let mut way = Way::new(case)?;
    let mut request = vec![0u8; 8 + 8 * case.records];
    let mut ids = vec![0u64; case.records];
    let mut syscalls = 0u64;
    let mut user_copy = 0u64;
    let mut responses = 0u64;
    let served: anyhow::Result<()> = loop {
        side.tick(Snapshot {
            responses,
            syscalls,
            user_copy,
        });
        match recv_exact(fd, &mut request, &mut syscalls) {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err(e.into()),
        }
        for (id, bytes) in ids.iter_mut().zip(request[8..].chunks_exact(8)) {
            *id = u64::from_le_bytes(bytes.try_into().expect("8-byte chunk"));
        }
        if let Some(id) = ids.iter().find(|id| **id >= table.count()) {
            break Err(anyhow::anyhow!(
                "the client asked for record {id}, beyond the table's {}",
                table.count()
            ));
        }
        match way.respond(fd, table, &ids, &mut syscalls) {
            Ok(copied) => user_copy += copied,
            Err(e) => break Err(e.into()),
        }
        responses += 1;
    };
    let mut outcome = side.end(Snapshot {
        responses,
        syscalls,
        user_copy,
    });
    // Drained on every path, a failed one included: the kernel gives the pages back first.
    let drained = way.drain(fd, &mut syscalls);
    served?;
    drained?;
    match &way {
        Way::ZeroCopy { tracker, enobufs, .. } => outcome.zerocopy = Some((tracker.counts.clone(), *enobufs)),
        // One notification per op: each covers exactly the op it follows.
        Way::UringZc { ring, .. } => {
            let c = &ring.counts;
            let counts = CompletionCounts {
                sends: c.sends,
                notifications: c.notifications,
                completed: c.notifications,
                copied: c.copied,
                unexpected: 0,
            };
            outcome.zerocopy = Some((counts, 0));
        }
        _ => {}
    }
    Ok(outcome)
}
