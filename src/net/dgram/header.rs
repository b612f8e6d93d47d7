//! The datagram format: a 16-byte header — the sequence number and the send time, each a u64
//! little endian — at the start of every datagram, then the pattern of `net::message` for the
//! sequence number from byte 16 on, so `--verify` checks every byte after the header against
//! the number the header carries.

use crate::net::message;

/// Bytes of the header; the smallest datagram.
pub const HEADER: usize = 16;

/// CLOCK_MONOTONIC in nanoseconds: the send time a datagram carries and the arrival time the
/// receiver compares it with (the same clock on both ends of one machine; across machines
/// only differences of transit times are used, in which the clocks' offset cancels).
pub fn monotonic_ns() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// What a datagram's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub seq: u64,
    pub sent_ns: u64,
}

impl Header {
    pub fn bytes(&self) -> [u8; HEADER] {
        let mut out = [0u8; HEADER];
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..].copy_from_slice(&self.sent_ns.to_le_bytes());
        out
    }

    /// The header at the start of `data`; None when it is shorter than a header.
    pub fn read(data: &[u8]) -> Option<Header> {
        let seq = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
        let sent_ns = u64::from_le_bytes(data.get(8..HEADER)?.try_into().ok()?);
        Some(Header { seq, sent_ns })
    }
}

/// Write the part of datagram `header.seq` that falls in `part`, which holds the datagram's
/// bytes from `offset` on: the header's bytes there, and with `pattern` the pattern after
/// them (without it the bytes after the header are left as they are).
pub fn write_part(part: &mut [u8], offset: usize, header: &Header, pattern: bool) {
    if pattern && offset + part.len() > HEADER {
        let skip = HEADER.saturating_sub(offset);
        message::fill(&mut part[skip..], header.seq, (offset + skip) as u64);
    }
    if offset < HEADER {
        let bytes = header.bytes();
        let n = (HEADER - offset).min(part.len());
        part[..n].copy_from_slice(&bytes[offset..offset + n]);
    }
}

/// Write datagram `header.seq` across consecutive fields (a gather list's buffers).
pub fn write_fields<'a>(fields: impl IntoIterator<Item = &'a mut [u8]>, header: &Header, pattern: bool) {
    let mut offset = 0;
    for field in fields {
        if !pattern && offset >= HEADER {
            break;
        }
        let len = field.len();
        write_part(field, offset, header, pattern);
        offset += len;
    }
}

/// Whether `data` is a whole datagram of `size` bytes whose bytes after the header are the
/// pattern of the sequence number in its header.
pub fn check(data: &[u8], size: usize) -> Result<Header, &'static str> {
    let header = Header::read(data).ok_or("shorter than the 16-byte header")?;
    if data.len() != size {
        return Err("not the datagram size");
    }
    message::check(&data[HEADER..], header.seq, HEADER as u64).map_err(|_| "a byte differs from the pattern")?;
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_written_in_any_split_checks_out_and_a_changed_byte_does_not() {
        let header = Header {
            seq: 77,
            sent_ns: 123_456,
        };
        let mut whole = vec![0u8; 200];
        write_part(&mut whole, 0, &header, true);
        assert_eq!(check(&whole, 200), Ok(header));
        for split in [1, 5, 15, 16, 17, 100] {
            let mut fields = [vec![0u8; split], vec![0u8; 7], vec![0u8; 200 - split - 7]];
            write_fields(fields.iter_mut().map(|f| &mut f[..]), &header, true);
            assert_eq!(fields.concat(), whole, "split at {split}");
        }
        let mut bad = whole.clone();
        bad[150] ^= 1;
        assert!(check(&bad, 200).is_err());
        assert!(check(&whole, 201).is_err());
        assert!(check(&whole[..10], 10).is_err());
    }

    #[test]
    fn without_pattern_only_the_header_is_rewritten() {
        let mut data = vec![9u8; 40];
        let (a, b) = data.split_at_mut(3);
        write_fields([a, b], &Header { seq: 1, sent_ns: 2 }, false);
        assert_eq!(Header::read(&data), Some(Header { seq: 1, sent_ns: 2 }));
        assert!(data[HEADER..].iter().all(|&b| b == 9));
    }
}
