//! One client thread: keep `outstanding` requests in flight on its connection, each naming N
//! record ids, time every response from its request's send to its last byte, and (with
//! verify) check every record against the pattern of the id it asked for.

use super::table::check_record;
use super::{recv_exact, send_all, Side, SideOutcome, Snapshot, ThreadStart};
use crate::case::{Pick, RecordsCase, HOT_SET_BYTES};
use crate::measure::histogram::LatencyHistogram;
use crate::observation::Role;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Instant;

/// xorshift64*: cheap, and the same ids for the same seed (a run can be reproduced).
struct Ids(u64);

impl Ids {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        // Multiply-high maps the 64-bit value onto 0..below without a division.
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) as u128 * below as u128) >> 64) as u64
    }
}

/// How many records ids are drawn from: the whole table, or a cached set for `hot`.
pub fn pick_range(case: &RecordsCase) -> u64 {
    let all = case.table_records();
    match case.pick {
        Pick::Random => all,
        Pick::Hot => (HOT_SET_BYTES / case.record_size.max(1))
            .max(case.records as u64)
            .min(all),
    }
}

/// Start client thread `start.index` on `stream`. On failure it raises `failed` and shuts the
/// connection (waking its peer); otherwise it shuts its sending side, so the server's thread
/// reads EOF after the last request and leaves.
pub(super) fn spawn<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    start: ThreadStart<'env>,
    case: &'env RecordsCase,
    stream: &'env TcpStream,
    failed: &'env AtomicBool,
) -> io::Result<ScopedJoinHandle<'scope, io::Result<SideOutcome>>> {
    let i = start.index;
    std::thread::Builder::new()
        .name(format!("iopath-records-cli-{i}"))
        .spawn_scoped(scope, move || {
            let result = run(start, case, i, stream.as_raw_fd());
            if result.is_err() {
                failed.store(true, Ordering::SeqCst);
                stream.shutdown(Shutdown::Both).ok();
            } else {
                stream.shutdown(Shutdown::Write).ok();
            }
            result.map_err(|e| io::Error::other(format!("{e:#}")))
        })
}

fn run(start: ThreadStart<'_>, case: &RecordsCase, index: usize, fd: RawFd) -> anyhow::Result<SideOutcome> {
    let mut side = Side::begin(start, Role::Client)?;
    let n = case.records;
    let depth = case.outstanding.max(1);
    let range = pick_range(case);
    let record_size = case.record_size as usize;
    let mut ids = Ids(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    // Slot s of these rings belongs to the request with seq % depth == s: at most `depth` are
    // in flight and responses come back in order, so a slot is free when its answer arrived.
    let mut asked = vec![0u64; depth * n];
    let mut sent_at = vec![Instant::now(); depth];
    let mut request = vec![0u8; 8 + 8 * n];
    let mut response = crate::net::message::buffer(case.response_bytes() as usize, case.align);
    let mut latency = LatencyHistogram::new();
    let (mut sent, mut received, mut syscalls) = (0u64, 0u64, 0u64);
    let (mut verified, mut corrupt) = (0u64, 0u64);
    loop {
        side.tick(Snapshot {
            responses: received,
            syscalls,
            user_copy: 0,
        });
        // After the window closes, no new request: collect the ones in flight, then leave.
        while !side.closed() && sent - received < depth as u64 {
            let slot = (sent % depth as u64) as usize;
            request[..8].copy_from_slice(&sent.to_le_bytes());
            for (k, bytes) in request[8..].chunks_exact_mut(8).enumerate() {
                let id = ids.next(range);
                asked[slot * n + k] = id;
                bytes.copy_from_slice(&id.to_le_bytes());
            }
            sent_at[slot] = Instant::now();
            send_all(fd, &request, &mut syscalls)?;
            sent += 1;
        }
        if sent == received {
            break;
        }
        if !recv_exact(fd, &mut response, &mut syscalls)? {
            anyhow::bail!(
                "the server closed the connection with {} responses owed",
                sent - received
            );
        }
        let slot = (received % depth as u64) as usize;
        if side.is_open() {
            latency.record_ns(sent_at[slot].elapsed().as_nanos() as u64);
        }
        if case.net.verify {
            for (k, record) in response.chunks_exact(record_size).enumerate() {
                if check_record(asked[slot * n + k], record) {
                    verified += 1;
                } else {
                    corrupt += 1;
                }
            }
        }
        received += 1;
    }
    let mut outcome = side.end(Snapshot {
        responses: received,
        syscalls,
        user_copy: 0,
    });
    outcome.latency = latency;
    outcome.verified_records = verified;
    outcome.corrupt_records = corrupt;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cover_the_range_and_stay_below_it() {
        let mut ids = Ids(12345);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let id = ids.next(10);
            seen[id as usize] += 1;
        }
        assert!(seen.iter().all(|c| (800..1200).contains(c)), "{seen:?}");
        assert_eq!(Ids(7).next(1), 0);
    }
}
