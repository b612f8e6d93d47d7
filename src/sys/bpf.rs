//! eBPF without a compiler: maps made and read with the bpf(2) system call, programs of
//! instructions built in Rust (`measure/trace/program.rs`) loaded as raw tracepoint programs
//! (attached by name with BPF_RAW_TRACEPOINT_OPEN: the kernel hands them the tracepoint's
//! arguments, building no record) or as tracepoint programs (attached through a perf event on
//! one CPU, PERF_EVENT_IOC_SET_BPF: they read the record tracefs' `format` describes). The
//! kernel's verifier checks every program before it runs; its log is the error.

use perf_event::events::Tracepoint;
use perf_event::{Builder, Counter};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_NOEXIST: u64 = 1;
const BPF_MAP_GET_NEXT_KEY: libc::c_int = 4;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_int = 17;
/// `_IOW('$', 8, __u32)`.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// How a program is run, which decides what its context holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramKind {
    /// On the record of a tracepoint (`struct trace_event_raw_*`), through a perf event.
    Tracepoint = 5,
    /// On the tracepoint's arguments, a u64 each (`struct bpf_raw_tracepoint_args`).
    RawTracepoint = 17,
}

/// One eBPF instruction as the kernel reads it (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

/// The kinds of map the probe uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    Hash = 1,
    Array = 2,
}

/// `union bpf_attr` for BPF_MAP_CREATE (the fields up to map_flags; the rest zero).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    _rest: [u32; 27],
}

/// `union bpf_attr` for the element commands.
#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value_or_next_key: u64,
    flags: u64,
    _rest: [u64; 12],
}

/// `union bpf_attr` for BPF_PROG_LOAD (up to prog_flags; the rest zero).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    _rest: [u64; 11],
}

/// `union bpf_attr` for BPF_RAW_TRACEPOINT_OPEN.
#[repr(C)]
#[derive(Default)]
struct RawTracepointAttr {
    name: u64,
    prog_fd: u32,
    _pad: u32,
    _rest: [u64; 14],
}

/// bpf(2) with `attr` of type `A`.
fn bpf<A>(cmd: libc::c_int, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised #[repr(C)] value of the layout the kernel reads
    // for `cmd` (zero past the fields used), its size passed with it; any pointer inside it
    // points at memory the caller keeps alive across the call.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut A, std::mem::size_of::<A>() as u32) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A map of fixed-size keys and values, read back as bytes.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
}

impl Map {
    pub fn create(kind: MapKind, key_size: usize, value_size: usize, max_entries: u32) -> io::Result<Map> {
        let mut attr = MapCreateAttr {
            map_type: kind as u32,
            key_size: key_size as u32,
            value_size: value_size as u32,
            max_entries,
            ..Default::default()
        };
        let fd = bpf(BPF_MAP_CREATE, &mut attr)?;
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Map {
            fd,
            key_size,
            value_size,
        })
    }

    /// The descriptor a program's map load (`BPF_PSEUDO_MAP_FD`) names.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The value at `key`, None when the map has none.
    pub fn lookup(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        let mut value = vec![0u8; self.value_size];
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value_or_next_key: value.as_mut_ptr() as u64,
            ..Default::default()
        };
        match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
            Ok(_) => Ok(Some(value)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Add `value` at `key` unless the map has an entry there already (false then).
    pub fn insert_new(&self, key: &[u8], value: &[u8]) -> io::Result<bool> {
        self.check_key(key)?;
        if value.len() != self.value_size {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a value of the wrong size"));
        }
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value_or_next_key: value.as_ptr() as u64,
            flags: BPF_NOEXIST,
            ..Default::default()
        };
        match bpf(BPF_MAP_UPDATE_ELEM, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every (key, value) in the map (an entry added or removed meanwhile may be missed).
    pub fn entries(&self) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        loop {
            let mut next = vec![0u8; self.key_size];
            let mut attr = ElemAttr {
                map_fd: self.fd.as_raw_fd() as u32,
                // A null key asks for the first.
                key: key.as_ref().map_or(0, |k| k.as_ptr() as u64),
                value_or_next_key: next.as_mut_ptr() as u64,
                ..Default::default()
            };
            match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
                Err(e) => return Err(e),
            }
            if let Some(value) = self.lookup(&next)? {
                out.push((next.clone(), value));
            }
            key = Some(next);
        }
    }

    fn check_key(&self, key: &[u8]) -> io::Result<()> {
        if key.len() == self.key_size {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::InvalidInput, "a key of the wrong size"))
        }
    }
}

/// A loaded program.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Load `insns` as a program of `kind`; the error carries the verifier's log.
    pub fn load(kind: ProgramKind, insns: &[Insn]) -> Result<Program, String> {
        const LICENSE: &[u8] = b"GPL\0";
        let mut log = vec![0u8; 64 << 10];
        let mut attr = ProgLoadAttr {
            prog_type: kind as u32,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            ..Default::default()
        };
        match bpf(BPF_PROG_LOAD, &mut attr) {
            Ok(fd) => Ok(Program {
                // SAFETY: the kernel returned a new descriptor that nothing else owns.
                fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            }),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let tail: Vec<&str> = text.lines().rev().take(6).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(format!(
                    "the kernel refused a probe program ({e}): {}",
                    tail.join(" | ")
                ))
            }
        }
    }

    /// Run this raw tracepoint program on every event of the tracepoint `name` (without its
    /// system, e.g. `softirq_entry`), on every CPU, until the returned descriptor is closed.
    pub fn attach_raw(&self, name: &str) -> io::Result<OwnedFd> {
        let name = std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut attr = RawTracepointAttr {
            name: name.as_ptr() as u64,
            prog_fd: self.fd.as_raw_fd() as u32,
            ..Default::default()
        };
        let fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr)?;
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }

    /// Run this tracepoint program on every event of tracepoint `id`, through a perf event opened on
    /// `cpu` for any task: the kernel runs a tracepoint's programs on every CPU
    /// (`perf_trace_run_bpf_submit`), from the attachment until the returned event is dropped.
    /// The same program attached twice to one tracepoint is refused (EEXIST).
    pub fn attach(&self, id: u64, cpu: usize) -> io::Result<Counter> {
        let mut b = Builder::new(Tracepoint::with_id(id));
        b.any_pid()
            .one_cpu(cpu)
            .include_kernel()
            .enabled(false)
            .sample_period(1);
        let event = b.build()?;
        // SAFETY: both descriptors are open and owned for the duration of the call; the ioctl
        // reads its argument by value.
        let rc = unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, self.fd.as_raw_fd()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(event)
    }
}
