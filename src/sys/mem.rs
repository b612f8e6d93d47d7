//! Page-aligned anonymous and file mappings, with the advice the memory benchmarks need
//! (transparent huge pages on or off, random access), and mincore residency checks.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Transparent huge page advice for an anonymous mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HugePages {
    /// MADV_HUGEPAGE: ask for 2 MiB pages where THP allows it.
    Want,
    /// MADV_NOHUGEPAGE: 4 KiB pages only, so TLB behaviour is the same on every machine.
    Refuse,
}

/// An anonymous private read-write mapping, unmapped on drop.
pub struct AnonMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: AnonMap owns its mapping exclusively (like a Box<[u8]>); access goes through &/&mut.
unsafe impl Send for AnonMap {}

impl AnonMap {
    /// Map `len` bytes (rounded up to the page size), zero-filled and not yet touched.
    pub fn new(len: usize, huge: HugePages) -> io::Result<AnonMap> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        let page = page_size();
        let len = len.div_ceil(page) * page;
        // SAFETY: a fresh anonymous mapping with no address hint; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = AnonMap {
            ptr: ptr as *mut u8,
            len,
        };
        let advice = match huge {
            HugePages::Want => libc::MADV_HUGEPAGE,
            HugePages::Refuse => libc::MADV_NOHUGEPAGE,
        };
        // SAFETY: ptr..ptr+len is the mapping just created. Failure (e.g. THP compiled out)
        // leaves the default behaviour, which the caller reports from sysfs.
        let _ = unsafe { libc::madvise(ptr, len, advice) };
        Ok(map)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is readable for len bytes and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is writable for len bytes, and &mut self makes this borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The mapping as 64-bit words (it is page aligned, so alignment holds).
    pub fn as_mut_words(&mut self) -> &mut [u64] {
        // SAFETY: page alignment satisfies u64 alignment; len / 8 words fit inside the mapping;
        // &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.len / 8) }
    }

    /// The mapping as 64-bit words, read-only.
    pub fn as_words(&self) -> &[u64] {
        // SAFETY: as above, shared borrow of initialised (zero-filled or written) memory.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.len / 8) }
    }
}

impl Drop for AnonMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe the mapping this value created and still owns.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// A read-only shared mapping of a file, advised for random access so every first touch of a
/// page is its own fault (no readahead), unmapped on drop.
pub struct FileMap {
    ptr: *mut u8,
    len: usize,
}

impl FileMap {
    pub fn open(file: &File, len: usize) -> io::Result<FileMap> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty file"));
        }
        // SAFETY: maps len bytes of an open file read-only; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = FileMap {
            ptr: ptr as *mut u8,
            len,
        };
        // SAFETY: ptr..ptr+len is the mapping just created.
        if unsafe { libc::madvise(ptr, len, libc::MADV_RANDOM) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(map)
    }

    /// Read one byte of every page from byte `from` (rounded down to a page) up to byte `to`
    /// (clamped to the mapping), in order, faulting each page in; returns their sum (so the
    /// reads cannot be optimised away). A long walk can be done in pieces.
    pub fn touch_pages(&self, from: usize, to: usize) -> u64 {
        let page = page_size();
        let mut sum = 0u64;
        let mut off = from / page * page;
        let end = to.min(self.len);
        while off < end {
            // SAFETY: off < len, inside the readable mapping; volatile keeps every read.
            sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(self.ptr.add(off)) } as u64);
            off += page;
        }
        sum
    }

    /// How many of the mapping's pages are resident in memory now (mincore).
    pub fn resident_pages(&self) -> io::Result<usize> {
        let pages = self.len.div_ceil(page_size());
        let mut vec = vec![0u8; pages];
        // SAFETY: ptr is page aligned, len is the mapping's length and vec has one byte per page.
        let rc = unsafe { libc::mincore(self.ptr as *mut libc::c_void, self.len, vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(vec.iter().filter(|b| *b & 1 != 0).count())
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe the mapping this value created and still owns.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The page size (sysconf), 4096 if the kernel will not say.
pub fn page_size() -> usize {
    // SAFETY: sysconf only returns a number.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// Write one byte of every page of `buf` (first touch of fresh anonymous memory = one minor
/// fault per page); volatile so the stores are not merged or dropped.
pub fn write_every_page(buf: &mut [u8]) {
    let page = page_size();
    let mut off = 0;
    while off < buf.len() {
        // SAFETY: off < buf.len(), so the pointer is inside the exclusively borrowed slice.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(off), 1) };
        off += page;
    }
}

/// A pointer-chasing buffer: slot i (at byte offset i x stride) holds the address of slot
/// next[i]. Built once from a successor table and then only read, so every stored value is an
/// address inside the mapping and `chase` can follow them without checks.
pub struct ChaseBuffer {
    map: AnonMap,
    slots: usize,
    /// Bytes between slots (the mapping itself is rounded up to whole pages).
    stride: usize,
}

impl ChaseBuffer {
    /// `next` must be a permutation of 0..next.len() (checked); stride a multiple of 8, >= 8.
    pub fn new(next: &[usize], stride: usize, huge: HugePages) -> io::Result<ChaseBuffer> {
        let slots = next.len();
        if stride < 8 || stride % 8 != 0 || slots < 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "stride must be a multiple of 8 and >= 2 slots",
            ));
        }
        let mut seen = vec![false; slots];
        for &n in next {
            if n >= slots || std::mem::replace(&mut seen[n], true) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "successor table is not a permutation",
                ));
            }
        }
        let mut map = AnonMap::new(slots * stride, huge)?;
        let base = map.ptr as usize;
        let words = map.as_mut_words();
        let step = stride / 8;
        for (i, &n) in next.iter().enumerate() {
            words[i * step] = (base + n * stride) as u64;
        }
        Ok(ChaseBuffer { map, slots, stride })
    }

    /// Follow `steps` pointers (rounded up to a multiple of 16) from slot `from` (taken modulo
    /// the slot count); returns the slot reached, so a long walk can be done in pieces, each
    /// going on where the last one ended, and a walk of every slot comes back to its start.
    pub fn chase_from(&self, from: usize, steps: u64) -> usize {
        let base = self.map.ptr as usize;
        let stride = self.stride;
        let mut p = base + (from % self.slots) * stride;
        for _ in 0..steps.div_ceil(16) {
            for _ in 0..16 {
                // SAFETY: p is the address of slot `from` (< slots, so inside the mapping and
                // written by `new`) or a value read from a slot; `new` only stored addresses
                // of slots inside this mapping, aligned to 8, and nothing writes them after.
                p = unsafe { *(p as *const usize) };
            }
        }
        std::hint::black_box(p);
        (p - base) / stride
    }
}
