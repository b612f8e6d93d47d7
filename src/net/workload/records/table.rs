//! The server's table of records and the pattern every record carries: word k of record `id`
//! is a function of (id, k), so a client can check any record it receives knowing only the id
//! it asked for, and a record sent in the wrong place or from the wrong offset fails the check.

use crate::case::Align;
use crate::net::message;
use crate::sys::aligned::AlignedBuf;
/// The table: `count` records of `record_size` bytes, contiguous, filled once when built and
/// never written again (zero-copy sends may have any record in flight several times at once).
pub struct Table {
    /// Placed as the case's `--align` says: the kernel copies records out of it.
    bytes: AlignedBuf,
    record_size: usize,
}

/// The 8 bytes at word `k` of record `id`.
#[inline]
pub fn pattern_word(id: u64, k: u64) -> [u8; 8] {
    // An odd multiplier makes id -> word injective for a fixed k; the position is mixed in so
    // that two words of one record differ.
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ 0x5851_F42D_4C95_7F2D)
        .to_le_bytes()
}

/// Write record `id`'s pattern into `out` (the tail of a size that is not a multiple of 8
/// gets the first bytes of the last word).
pub fn fill_record(id: u64, out: &mut [u8]) {
    for (k, chunk) in out.chunks_mut(8).enumerate() {
        let word = pattern_word(id, k as u64);
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Whether `record` is exactly record `id`'s pattern.
pub fn check_record(id: u64, record: &[u8]) -> bool {
    record
        .chunks(8)
        .enumerate()
        .all(|(k, chunk)| chunk == &pattern_word(id, k as u64)[..chunk.len()])
}

impl Table {
    /// Allocate and fill `count` records of `record_size` bytes (touching every page now, so
    /// no page fault of the table lands inside a measured window). `stopped` is asked every
    /// 16 MiB: a big table takes seconds to fill, and a stop must not wait for it (None then).
    pub fn new(
        record_size: usize,
        count: u64,
        align: Align,
        stopped: &dyn Fn() -> bool,
    ) -> anyhow::Result<Option<Table>> {
        let total = (record_size as u64)
            .checked_mul(count)
            .filter(|t| *t <= isize::MAX as u64)
            .ok_or_else(|| anyhow::anyhow!("a table of {count} records of {record_size} B is too large"))?;
        let (boundary, offset) = message::placement(align);
        let mut bytes = AlignedBuf::try_zeroed(total as usize, boundary, offset)
            .ok_or_else(|| anyhow::anyhow!("could not allocate the {total}-byte table"))?;
        // Written once, record by record (fresh zeroed pages: no zeroing pass of ours first).
        let check_every = ((16 << 20) / record_size).max(1) as u64;
        for (id, record) in bytes.chunks_mut(record_size).enumerate() {
            if id as u64 % check_every == 0 && stopped() {
                return Ok(None);
            }
            fill_record(id as u64, record);
        }
        Ok(Some(Table { bytes, record_size }))
    }

    /// A table over `bytes` as they are (the alias probe's scratch records).
    pub fn from_bytes(bytes: Vec<u8>, record_size: usize) -> Table {
        let mut placed = message::buffer(bytes.len(), Align::Page);
        placed.copy_from_slice(&bytes);
        Table {
            bytes: placed,
            record_size,
        }
    }

    /// The bytes back, for a caller that must rewrite them (never while a case runs).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes.to_vec()
    }

    /// The address of the first record (tests hold where the table starts).
    #[cfg(test)]
    pub fn addr(&self) -> usize {
        self.bytes.addr()
    }

    pub fn count(&self) -> u64 {
        (self.bytes.len() / self.record_size) as u64
    }

    /// Record `id` in place (ids are checked by the server against `count` first).
    #[inline]
    pub fn record(&self, id: u64) -> &[u8] {
        let start = id as usize * self.record_size;
        &self.bytes[start..start + self.record_size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_checks_and_no_record_passes_for_another() {
        for size in [8usize, 13, 128, 1024] {
            let table = Table::new(size, 50, Align::Page, &|| false).unwrap().unwrap();
            assert_eq!(table.count(), 50);
            for id in 0..50 {
                assert!(check_record(id, table.record(id)), "size {size} id {id}");
                assert!(!check_record(id + 1, table.record(id)), "size {size} id {id}");
            }
            let mut flipped = table.record(7).to_vec();
            flipped[size - 1] ^= 1;
            assert!(
                !check_record(7, &flipped),
                "a flipped last byte is caught (size {size})"
            );
        }
        assert!(
            Table::new(128, 1 << 20, Align::Page, &|| true).unwrap().is_none(),
            "a stop ends the fill"
        );
    }

    /// The table the kernel copies records out of starts where `--align` says.
    #[test]
    fn the_table_is_placed_as_asked() {
        for align in [Align::Page, Align::Misaligned] {
            let table = Table::new(4096, 64, align, &|| false).unwrap().unwrap();
            assert!(message::placed_as(table.addr(), align), "{align}: {:#x}", table.addr());
            assert!(check_record(63, table.record(63)));
        }
    }
}
