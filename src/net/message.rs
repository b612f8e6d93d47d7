//! The message: `fields` separately allocated buffers whose sizes add up to the message size,
//! filled with a pattern derived from the message's sequence number so the receiver can check
//! every byte. Every buffer the kernel copies into or out of is made by `buffer`, placed as
//! the case's `Align` says.

use crate::case::{Align, MISALIGNED_OFFSET};
use crate::sys::aligned::AlignedBuf;
use std::sync::OnceLock;

/// `len` zero bytes placed as `align` says: on a page boundary, `MISALIGNED_OFFSET` bytes past
/// one, or wherever the allocator puts them.
pub fn buffer(len: usize, align: Align) -> AlignedBuf {
    let (boundary, offset) = placement(align);
    AlignedBuf::zeroed(len, boundary, offset)
}

/// `align` as the boundary and the offset past it that `sys::aligned::AlignedBuf` takes.
pub fn placement(align: Align) -> (usize, usize) {
    let page = crate::sys::mem::page_size();
    match align {
        Align::Page => (page, 0),
        Align::Misaligned => (page, MISALIGNED_OFFSET),
        Align::Malloc => (1, 0),
    }
}

/// Whether a buffer starting at `addr` is placed as `align` asks (`malloc` accepts any).
pub fn placed_as(addr: usize, align: Align) -> bool {
    let page = crate::sys::mem::page_size();
    match align {
        Align::Page => addr % page == 0,
        Align::Misaligned => addr % page == MISALIGNED_OFFSET,
        Align::Malloc => true,
    }
}

/// The pattern repeats every PERIOD bytes; a prime so it never lines up with buffer sizes.
const PERIOD: usize = 251;
/// A chunk of the pattern that is a whole number of periods, so consecutive chunks start at
/// the same phase and filling is plain memcpy.
const CHUNK: usize = PERIOD * 261;

fn pattern_table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| (0..CHUNK + PERIOD).map(|i| ((i % PERIOD) * 13 + 5) as u8).collect())
}

/// Where in the period the byte at `offset` of message `seq` falls.
fn phase(seq: u64, offset: u64) -> usize {
    ((seq.wrapping_mul(7) % PERIOD as u64 + offset % PERIOD as u64) % PERIOD as u64) as usize
}

/// The expected byte at `offset` of message `seq`.
#[cfg(test)]
pub fn pattern_byte(seq: u64, offset: u64) -> u8 {
    pattern_table()[phase(seq, offset)]
}

/// Fill `dst`, which holds bytes starting at `offset` of message `seq`, with the pattern.
pub fn fill(dst: &mut [u8], seq: u64, offset: u64) {
    let table = pattern_table();
    let start = phase(seq, offset);
    for chunk in dst.chunks_mut(CHUNK) {
        let n = chunk.len();
        chunk.copy_from_slice(&table[start..start + n]);
    }
}

/// Whether `data`, holding bytes from `offset` of message `seq`, matches the pattern; on a
/// mismatch, the offset in `data` of the first wrong byte.
pub fn check(data: &[u8], seq: u64, offset: u64) -> Result<(), usize> {
    let table = pattern_table();
    let start = phase(seq, offset);
    for (i, chunk) in data.chunks(CHUNK).enumerate() {
        if chunk != &table[start..start + chunk.len()] {
            let bad = chunk.iter().zip(&table[start..]).position(|(a, b)| a != b).unwrap_or(0);
            return Err(i * CHUNK + bad);
        }
    }
    Ok(())
}

/// Field sizes for a message of `size` bytes in `fields` fields: split evenly, the remainder
/// to the last. With more fields than bytes, the first `size` fields get one byte each and
/// the rest are empty.
pub fn field_sizes(size: usize, fields: usize) -> Vec<usize> {
    let fields = fields.max(1);
    let base = size / fields;
    let mut sizes = vec![base; fields];
    if base == 0 {
        for s in sizes.iter_mut().take(size) {
            *s = 1;
        }
    } else if let Some(last) = sizes.last_mut() {
        *last += size - base * fields;
    }
    sizes
}

/// One message as the application holds it: separately allocated fields, each placed as the
/// case's `Align` says.
pub struct Message {
    pub fields: Vec<AlignedBuf>,
}

impl Message {
    /// Allocate page-aligned fields, touch every page, and fill them for message `seq`.
    pub fn new(size: usize, fields: usize, seq: u64) -> Message {
        Message::placed(size, fields, seq, Align::Page)
    }

    /// `new` with the fields placed as `align` says.
    pub fn placed(size: usize, fields: usize, seq: u64, align: Align) -> Message {
        let mut message = Message {
            fields: field_sizes(size, fields)
                .into_iter()
                .map(|n| buffer(n, align))
                .collect(),
        };
        message.fill(seq);
        message
    }

    /// Rewrite the contents for message `seq`.
    pub fn fill(&mut self, seq: u64) {
        let mut offset = 0u64;
        for field in &mut self.fields {
            fill(field, seq, offset);
            offset += field.len() as u64;
        }
    }

    pub fn len(&self) -> usize {
        self.fields.iter().map(|f| f.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Check every field against message `seq`; the message offset of the first bad byte.
    pub fn check(&self, seq: u64) -> Result<(), usize> {
        let mut offset = 0usize;
        for field in &self.fields {
            check(field, seq, offset as u64).map_err(|bad| offset + bad)?;
            offset += field.len();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_split_evenly_with_remainder_last() {
        assert_eq!(field_sizes(64, 8), vec![8; 8]);
        assert_eq!(field_sizes(100, 8), vec![12, 12, 12, 12, 12, 12, 12, 16]);
        assert_eq!(field_sizes(3, 8), vec![1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(field_sizes(10, 1), vec![10]);
    }

    #[test]
    fn fill_matches_pattern_byte_and_check_finds_corruption() {
        let mut m = Message::new(200_000, 8, 42);
        assert_eq!(m.len(), 200_000);
        assert_eq!(m.check(42), Ok(()));
        assert!(m.check(43).is_err(), "another sequence number has another pattern");
        m.fields[3][7] ^= 1;
        let offset = m.fields[..3].iter().map(|f| f.len()).sum::<usize>() + 7;
        assert_eq!(m.check(42), Err(offset));
    }

    #[test]
    fn buffers_are_placed_as_asked() {
        for align in Align::ALL {
            let m = Message::placed(300_000, 3, 1, align);
            for field in &m.fields {
                assert!(placed_as(field.addr(), align), "{align}: {field:?}");
            }
            assert_eq!(m.check(1), Ok(()));
        }
        assert!(!placed_as(buffer(4096, Align::Misaligned).addr(), Align::Page));
    }

    proptest! {
        #[test]
        fn fill_agrees_with_bytewise_pattern(seq in any::<u64>(), offset in 0u64..1_000_000, len in 0usize..70_000) {
            let mut buf = vec![0u8; len];
            fill(&mut buf, seq, offset);
            for (i, b) in buf.iter().enumerate().step_by(97) {
                prop_assert_eq!(*b, pattern_byte(seq, offset + i as u64));
            }
            prop_assert_eq!(check(&buf, seq, offset), Ok(()));
        }
    }
}
