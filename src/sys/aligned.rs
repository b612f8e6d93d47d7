//! A zero-filled byte buffer placed where the caller says: on a boundary of `align` bytes (a
//! page) plus `offset` bytes. The kernel's copy to and from user space is far slower on some
//! CPUs when the user buffer and the kernel's page are mutually misaligned, so every buffer a
//! measurement hands to the kernel is one of these (`net::message::buffer`).

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// `len` bytes starting `offset` bytes past an `align`-byte boundary, freed on drop.
pub struct AlignedBuf {
    base: NonNull<u8>,
    layout: Layout,
    offset: usize,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>); access goes through
// & and &mut, so sending or sharing it across threads is as safe as for Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above; &AlignedBuf only gives shared reads.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zero bytes at `offset` past an `align` boundary (`align` a power of two; 1 leaves
    /// the placement to the allocator, as `vec![0u8; len]` does).
    pub fn zeroed(len: usize, align: usize, offset: usize) -> AlignedBuf {
        match AlignedBuf::try_zeroed(len, align, offset) {
            Some(buf) => buf,
            None => alloc::handle_alloc_error(layout(len, align, offset)),
        }
    }

    /// `zeroed`, or None when the memory cannot be had (a table as large as the machine).
    pub fn try_zeroed(len: usize, align: usize, offset: usize) -> Option<AlignedBuf> {
        let layout = layout(len, align, offset);
        // SAFETY: the layout has a non-zero size; a null result is None.
        let base = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(AlignedBuf {
            base,
            layout,
            offset,
            len,
        })
    }

    /// The address of the first byte (tests hold where buffers start).
    pub fn addr(&self) -> usize {
        self.base.as_ptr() as usize + self.offset
    }

    pub fn as_slice(&self) -> &[u8] {
        self
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
}

fn layout(len: usize, align: usize, offset: usize) -> Layout {
    let size = offset.saturating_add(len).max(1);
    Layout::from_size_align(size, align.max(1))
        .unwrap_or_else(|e| panic!("buffer of {len} bytes at {offset} past {align}: {e}"))
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: base..base+offset+len is inside the allocation (its size is at least
        // offset + len), zero-initialised at allocation, and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(self.offset), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref; &mut self makes this borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(self.offset), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: base was allocated with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.base.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf {{ addr: {:#x}, len: {} }}", self.addr(), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_where_asked_is_zeroed_and_writable() {
        for (len, offset) in [(0, 0), (1, 0), (4096, 16), (200_000, 0), (1 << 20, 16)] {
            let mut buf = AlignedBuf::zeroed(len, 4096, offset);
            assert_eq!(buf.addr() % 4096, offset, "len {len}");
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|b| *b == 0));
            if len > 0 {
                buf[len - 1] = 7;
                assert_eq!(buf.as_slice()[len - 1], 7);
            }
        }
    }
}
