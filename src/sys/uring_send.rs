//! io_uring sends from a ring of message slots: SENDMSG, which copies like sendmsg(), and
//! SENDMSG_ZC, which pins the pages instead and posts a second CQE, the notification, once
//! the kernel no longer needs them. Used by the `uring` and `uring-zc` send modes; usable by
//! anything that sends messages of fixed field sizes (it knows nothing of the stream's
//! `Message`).
//!
//! The ring owns every byte the kernel may read — the fields, the iovecs, the msghdr — and
//! hands a slot's fields out for writing only while no op references them (`write_fields`),
//! or, for the alias probe, once the op's result has come (`overwrite_sent`), so the API is
//! safe.
//! What it relies on, checked on Linux 6.18 (docs/methodology.md, "io_uring send modes"):
//! - a SENDMSG_ZC result CQE with IORING_CQE_F_MORE is followed by a notification CQE
//!   (IORING_CQE_F_NOTIF, same user_data), also when the result is an error;
//! - with IORING_SEND_ZC_REPORT_USAGE the notification's `res` has bit 31
//!   (IORING_NOTIF_USAGE_ZC_COPIED) set when the kernel copied the data (or never used zero
//!   copy), clear when the pages went out by reference;
//! - MSG_WAITALL makes io_uring retry a short stream send inside the op, and IOSQE_IO_LINK
//!   starts an op only when the one before it completed: a chain of sends on one socket
//!   cannot interleave its bytes;
//! - SENDMSG_ZC takes registered buffers (IORING_RECVSEND_FIXED_BUF; every iovec must lie
//!   inside the buffer at sqe->buf_index) since Linux 6.15; plain SENDMSG refuses them (EINVAL).

use crate::sys::aligned::AlignedBuf;
use io_uring::{opcode, squeue, types, IoUring, Probe};
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// sqe->ioprio for send ops: the buffer is a registered one (include/uapi/linux/io_uring.h).
pub const RECVSEND_FIXED_BUF: u16 = 1 << 2;
/// sqe->ioprio for SEND(MSG)_ZC: report in the notification whether the data was copied.
pub const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// In a notification's res: the kernel copied (or did not use zero copy for) the data.
pub const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;
/// cqe->flags: another CQE for the same request follows (the notification).
pub const CQE_F_MORE: u32 = 1 << 1;
/// cqe->flags: this CQE is a zero-copy notification.
pub const CQE_F_NOTIF: u32 = 1 << 3;

/// user_data of the construction-time probe op and of cancellations (slots use their index).
const PROBE_TOKEN: u64 = u64::MAX;
const CANCEL_TOKEN: u64 = u64::MAX - 1;
/// The kernel refuses a registered buffer larger than this (io_buffer_validate).
pub const MAX_FIXED_BUFFER: usize = 1 << 30;
/// How long Drop waits for the kernel to let go of slots after cancelling.
const DROP_PATIENCE: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------------------------------
// CQE bookkeeping, a pure state machine.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// No op references the slot: its fields may be written.
    Free,
    /// In the next chain, not yet handed to the kernel.
    Queued,
    /// Submitted; its result CQE has not arrived.
    InFlight,
    /// The result came with F_MORE: the kernel may still read the pages until the notification.
    AwaitingNotif,
    /// The notification came before the result (not seen, but not excluded by the ABI).
    NotifFirst { copied: bool },
}

/// What the CQEs said so far (monotonic).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CqeCounts {
    /// Send SQEs handed to the kernel.
    pub sqes: u64,
    /// Every CQE of a send: results and notifications.
    pub cqes: u64,
    pub results: u64,
    /// Results that were an error (-errno).
    pub failed_results: u64,
    pub notifications: u64,
    /// Notifications of successful sends with IORING_NOTIF_USAGE_ZC_COPIED set.
    pub copied: u64,
    /// Notifications of successful sends without it: the pages went out by reference.
    pub zero_copied: u64,
    /// Notifications of failed sends (their usage bit says nothing about the data path).
    pub after_error: u64,
    /// CQEs that matched no op in the state they claimed (should stay 0).
    pub unexpected: u64,
}

/// What one CQE meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqeEvent {
    /// The op's result: bytes sent or -errno; `more` says a notification follows.
    Result {
        slot: usize,
        res: i32,
        more: bool,
    },
    Notification {
        slot: usize,
        copied: bool,
    },
    Unexpected,
}

/// Which slots the kernel may still read, from the CQEs seen. A slot is free again after its
/// result CQE when that has no F_MORE, otherwise only after its notification — whatever the
/// result was, an error included.
#[derive(Debug, Clone)]
pub struct SlotTracker {
    states: Vec<SlotState>,
    /// The last result of each slot's op, to tell a failed send's notification apart.
    results: Vec<i32>,
    /// How many slots wait for their result CQE, and how many the kernel has not finished
    /// with, kept as the states change: asked several times per send, a scan of a
    /// zero-copy ring's 1024 slots each time would be most of a small message's cost.
    results_due: usize,
    outstanding: usize,
    pub counts: CqeCounts,
}

impl SlotState {
    fn result_due(self) -> bool {
        matches!(self, SlotState::InFlight | SlotState::NotifFirst { .. })
    }

    fn outstanding(self) -> bool {
        !matches!(self, SlotState::Free | SlotState::Queued)
    }
}

impl SlotTracker {
    pub fn new(slots: usize) -> SlotTracker {
        SlotTracker {
            states: vec![SlotState::Free; slots],
            results: vec![0; slots],
            results_due: 0,
            outstanding: 0,
            counts: CqeCounts::default(),
        }
    }

    /// Move a slot to `next`, keeping the two tallies.
    fn set(&mut self, slot: usize, next: SlotState) {
        let last = self.states[slot];
        self.results_due = self.results_due - usize::from(last.result_due()) + usize::from(next.result_due());
        self.outstanding = self.outstanding - usize::from(last.outstanding()) + usize::from(next.outstanding());
        self.states[slot] = next;
    }

    pub fn is_free(&self, slot: usize) -> bool {
        self.states.get(slot) == Some(&SlotState::Free)
    }

    pub fn is_queued(&self, slot: usize) -> bool {
        self.states.get(slot) == Some(&SlotState::Queued)
    }

    /// Whether the slot's op was submitted and its result CQE has not come.
    pub fn result_pending(&self, slot: usize) -> bool {
        self.states.get(slot).is_some_and(|s| s.result_due())
    }

    /// Slots whose op the kernel has and has not finished with (results or notifications due).
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Slots whose result CQE is still due.
    pub fn results_due(&self) -> usize {
        self.results_due
    }

    /// Put a free slot in the next chain; false when it is not free.
    pub fn queue(&mut self, slot: usize) -> bool {
        if !self.is_free(slot) {
            return false;
        }
        self.set(slot, SlotState::Queued);
        true
    }

    /// A queued slot's SQE went to the kernel.
    pub fn submitted(&mut self, slot: usize) {
        if self.is_queued(slot) {
            self.set(slot, SlotState::InFlight);
            self.counts.sqes += 1;
        }
    }

    fn count_notification(&mut self, slot: usize, copied: bool) {
        self.counts.notifications += 1;
        if self.results[slot] < 0 {
            self.counts.after_error += 1;
        } else if copied {
            self.counts.copied += 1;
        } else {
            self.counts.zero_copied += 1;
        }
    }

    /// Apply one CQE of a slot's op.
    pub fn complete(&mut self, user_data: u64, res: i32, flags: u32) -> CqeEvent {
        self.counts.cqes += 1;
        let slot = user_data as usize;
        let Some(state) = usize::try_from(user_data)
            .ok()
            .and_then(|s| self.states.get(s).copied())
        else {
            self.counts.unexpected += 1;
            return CqeEvent::Unexpected;
        };
        if flags & CQE_F_NOTIF != 0 {
            let copied = res as u32 & NOTIF_USAGE_ZC_COPIED != 0;
            match state {
                SlotState::AwaitingNotif => {
                    self.set(slot, SlotState::Free);
                    self.count_notification(slot, copied);
                }
                // Counted when the result says whether the send succeeded.
                SlotState::InFlight => self.set(slot, SlotState::NotifFirst { copied }),
                _ => {
                    self.counts.unexpected += 1;
                    return CqeEvent::Unexpected;
                }
            }
            return CqeEvent::Notification { slot, copied };
        }
        let more = flags & CQE_F_MORE != 0;
        match state {
            SlotState::InFlight => {
                let next = if more {
                    SlotState::AwaitingNotif
                } else {
                    SlotState::Free
                };
                self.set(slot, next);
            }
            SlotState::NotifFirst { copied } => {
                self.set(slot, SlotState::Free);
                self.results[slot] = res;
                if more {
                    self.count_notification(slot, copied);
                } else {
                    self.counts.unexpected += 1;
                }
            }
            _ => {
                self.counts.unexpected += 1;
                return CqeEvent::Unexpected;
            }
        }
        self.results[slot] = res;
        self.counts.results += 1;
        if res < 0 {
            self.counts.failed_results += 1;
        }
        CqeEvent::Result { slot, res, more }
    }
}

// ---------------------------------------------------------------------------------------
// The ring.

/// Why a ring could not be set up: the kernel refusing the feature (a reason for the user),
/// or any other error.
#[derive(Debug)]
pub enum SetupError {
    Refused(String),
    Failed(io::Error),
}

impl From<io::Error> for SetupError {
    fn from(e: io::Error) -> SetupError {
        SetupError::Failed(e)
    }
}

/// Why io_uring_setup failed, as a refusal the user can act on; None when it is not one.
/// `disabled` is /proc/sys/kernel/io_uring_disabled.
pub fn setup_refusal(err: &io::Error, disabled: Option<i64>) -> Option<String> {
    match err.raw_os_error()? {
        libc::EPERM | libc::EACCES => Some(match disabled {
            Some(2) => "io_uring is switched off for every process (kernel.io_uring_disabled = 2)".to_string(),
            Some(1) => "io_uring is limited to CAP_SYS_ADMIN and the group in kernel.io_uring_group (kernel.io_uring_disabled = 1), and this process has neither".to_string(),
            _ => format!("io_uring_setup was not permitted ({err}): a seccomp filter or container profile forbids it"),
        }),
        libc::ENOSYS => Some("this kernel has no io_uring (io_uring_setup: ENOSYS)".to_string()),
        _ => None,
    }
}

/// What a ring holds and how it sends.
#[derive(Debug, Clone)]
pub struct SendRingConfig {
    /// Message slots; a slot is reused only when the kernel is done with it.
    pub slots: usize,
    /// Bytes of each field of a message (every slot alike).
    pub field_sizes: Vec<usize>,
    /// The most SQEs submitted as one linked chain.
    pub batch: usize,
    /// SENDMSG_ZC with IORING_SEND_ZC_REPORT_USAGE instead of SENDMSG.
    pub zero_copy: bool,
    /// Put all slots in one registered buffer (zero copy only: SENDMSG refuses them).
    pub fixed_buffers: bool,
    /// Where every field (with fixed buffers: the one arena) starts: `offset` bytes past an
    /// `align`-byte boundary (`sys::aligned::AlignedBuf`; align 1 leaves it to the allocator).
    pub align: usize,
    pub offset: usize,
}

/// The msghdr of a slot and the iovecs it points to.
struct Header {
    msg: libc::msghdr,
    iov: Vec<libc::iovec>,
    /// Every non-empty field as an iovec: what a whole message sends.
    whole: Vec<libc::iovec>,
}

// SAFETY: the raw pointers in a Header point into memory owned by the same SendRing (its
// slots or arena); the ring moves between threads as a whole and is used by one at a time.
unsafe impl Send for Header {}

struct Slot {
    /// Separately allocated fields, placed as the config says; empty with fixed buffers (the
    /// fields are in the arena).
    fields: Vec<AlignedBuf>,
    /// With fixed buffers: each field's (start, length) in the arena.
    ranges: Vec<(usize, usize)>,
    /// Boxed so the SQE's pointer to it survives the slots Vec moving; rewritten only while
    /// the slot is free (`queue_bytes`).
    header: Box<Header>,
    /// Bytes the op queued for this slot must send (a result short of it is a failure).
    expected: usize,
}

/// Why the ring stopped: the first failed or short result, or a failed io_uring_enter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Errno(i32),
    Short {
        sent: usize,
        len: usize,
    },
    /// io_uring_enter itself failed (errno), maybe with ops submitted: which CQEs are still
    /// due is unknown, so the ring takes no more messages (their slots stay the kernel's
    /// until their CQEs come).
    Enter(i32),
}

/// Counts of a ring (monotonic).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RingCounts {
    /// io_uring_enter calls (submissions and waits), the ring's only system calls once set up.
    pub enters: u64,
    pub cqe: CqeCounts,
}

pub struct SendRing {
    // Declared first so the ring closes before the memory it was given is freed.
    ring: IoUring,
    tracker: SlotTracker,
    slots: Vec<Slot>,
    /// With fixed buffers: every slot's fields, registered as buffer 0.
    arena: AlignedBuf,
    message_len: usize,
    /// Queued (slot, socket) pairs of the next chain, in send order.
    chain: Vec<(usize, RawFd)>,
    batch: usize,
    zero_copy: bool,
    fixed: bool,
    enters: u64,
    failure: Option<Failure>,
    /// Test hook: the next io_uring_enter submits as usual, then fails with this errno.
    #[cfg(test)]
    fail_next_enter: Option<i32>,
}

impl SendRing {
    pub fn new(config: &SendRingConfig) -> Result<SendRing, SetupError> {
        let slots = config.slots.max(1);
        let batch = config.batch.clamp(1, slots);
        let message_len: usize = config.field_sizes.iter().sum();
        if config.fixed_buffers && !config.zero_copy {
            return Err(SetupError::Failed(io::Error::new(
                io::ErrorKind::InvalidInput,
                "registered buffers need SENDMSG_ZC: the kernel refuses them for SENDMSG",
            )));
        }
        if config.fixed_buffers && slots.saturating_mul(message_len) > MAX_FIXED_BUFFER {
            return Err(SetupError::Failed(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the ring is larger than the 1 GiB a registered buffer may hold",
            )));
        }
        let ring = Self::build_ring(config, slots, batch)?;
        let arena_len = if config.fixed_buffers { slots * message_len } else { 0 };
        let mut arena = AlignedBuf::zeroed(arena_len, config.align, config.offset);
        let mut slot_list = Vec::with_capacity(slots);
        for s in 0..slots {
            slot_list.push(Self::build_slot(s, config, message_len, &mut arena));
        }
        if config.fixed_buffers {
            Self::register_arena(&ring, &mut arena)?;
        }
        let mut send_ring = SendRing {
            ring,
            tracker: SlotTracker::new(slots),
            slots: slot_list,
            arena,
            message_len,
            chain: Vec::with_capacity(batch),
            batch,
            zero_copy: config.zero_copy,
            fixed: config.fixed_buffers,
            enters: 0,
            failure: None,
            #[cfg(test)]
            fail_next_enter: None,
        };
        if config.zero_copy {
            send_ring.probe_zero_copy_flags()?;
        }
        Ok(send_ring)
    }

    /// The ring, its CQ with room for a result and a notification per slot; for zero copy,
    /// refused when the kernel has no SENDMSG_ZC.
    fn build_ring(config: &SendRingConfig, slots: usize, batch: usize) -> Result<IoUring, SetupError> {
        let entries = (batch as u32 + 1).next_power_of_two().max(4);
        // Room for a result and a notification per slot, so the CQ never overflows.
        let cq_entries = (2 * slots as u32).next_power_of_two().clamp(2 * entries, 65536);
        let ring = IoUring::builder()
            .setup_cqsize(cq_entries)
            .build(entries)
            .map_err(|e| {
                match setup_refusal(&e, crate::sys::procfs::read_i64("/proc/sys/kernel/io_uring_disabled")) {
                    Some(reason) => SetupError::Refused(reason),
                    None => SetupError::Failed(e),
                }
            })?;
        if config.zero_copy {
            let mut probe = Probe::new();
            if let Err(e) = ring.submitter().register_probe(&mut probe) {
                return Err(SetupError::Refused(format!(
                    "this kernel cannot list its io_uring opcodes (IORING_REGISTER_PROBE: {e})"
                )));
            }
            if !probe.is_supported(opcode::SendMsgZc::CODE) {
                return Err(SetupError::Refused(
                    "this kernel has no IORING_OP_SENDMSG_ZC (Linux 6.1 or later has it)".to_string(),
                ));
            }
        }
        Ok(ring)
    }

    /// Slot `s`: its fields (separately allocated, or ranges of the arena with fixed buffers)
    /// and its msghdr pointing at all of them.
    fn build_slot(s: usize, config: &SendRingConfig, message_len: usize, arena: &mut AlignedBuf) -> Slot {
        let mut fields = Vec::new();
        let mut ranges = Vec::new();
        let mut iov = Vec::new();
        if config.fixed_buffers {
            let mut start = s * message_len;
            for &n in &config.field_sizes {
                ranges.push((start, n));
                start += n;
            }
            for &(start, n) in ranges.iter().filter(|(_, n)| *n > 0) {
                iov.push(libc::iovec {
                    iov_base: arena[start..start + n].as_mut_ptr().cast(),
                    iov_len: n,
                });
            }
        } else {
            fields = config
                .field_sizes
                .iter()
                .map(|&n| AlignedBuf::zeroed(n, config.align, config.offset))
                .collect();
            for field in fields.iter_mut().filter(|f| !f.is_empty()) {
                iov.push(libc::iovec {
                    iov_base: field.as_mut_ptr().cast(),
                    iov_len: field.len(),
                });
            }
        }
        // SAFETY: msghdr is plain data; zeroed means no address and no control data.
        let msg: libc::msghdr = unsafe { std::mem::zeroed() };
        let whole = iov.clone();
        let mut header = Box::new(Header { msg, iov, whole });
        header.msg.msg_iov = header.iov.as_mut_ptr();
        header.msg.msg_iovlen = header.iov.len() as _;
        Slot {
            fields,
            ranges,
            header,
            expected: message_len,
        }
    }

    /// Register the arena (every slot's fields) as fixed buffer 0; a refusal for want of
    /// locked memory says what to raise.
    fn register_arena(ring: &IoUring, arena: &mut AlignedBuf) -> Result<(), SetupError> {
        let region = [libc::iovec {
            iov_base: arena.as_mut_ptr().cast(),
            iov_len: arena.len(),
        }];
        // SAFETY: the arena is moved into the SendRing `new` builds and never reallocated;
        // the kernel pins its pages at registration, and the ring is dropped (closing the
        // registration) no earlier than the arena.
        if let Err(e) = unsafe { ring.submitter().register_buffers(&region) } {
            return Err(match e.raw_os_error() {
                Some(libc::ENOMEM) | Some(libc::EPERM) => SetupError::Refused(format!(
                    "registering the ring's {} bytes as a fixed buffer was refused ({e}): RLIMIT_MEMLOCK ({}) is too low; raise `ulimit -l` or run with CAP_IPC_LOCK",
                    arena.len(),
                    memlock_limit()
                )),
                _ => SetupError::Failed(e),
            });
        }
        Ok(())
    }

    /// Whether the kernel takes SENDMSG_ZC with the ioprio flags we use: a prep-time check
    /// (EINVAL for a flag it does not know, or for registered buffers before Linux 6.15) on an
    /// op with no socket (fd -1), which then fails with EBADF having sent nothing.
    fn probe_zero_copy_flags(&mut self) -> Result<(), SetupError> {
        let entry = self.build_entry(0, -1).user_data(PROBE_TOKEN);
        // SAFETY: the entry points at slot 0's msghdr and memory, owned by self; the loop
        // below waits for the op's result (and its notification) before returning.
        unsafe { self.ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("the submission queue is full before any send"))?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let (mut result, mut more, mut notified) = (None, false, false);
        while result.is_none() || (more && !notified) {
            if Instant::now() > deadline {
                return Err(SetupError::Failed(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the io_uring probe op did not complete within 2 s",
                )));
            }
            self.enter(1, deadline)?;
            for cqe in self.ring.completion() {
                if cqe.user_data() != PROBE_TOKEN {
                    continue;
                }
                if cqe.flags() & CQE_F_NOTIF != 0 {
                    notified = true;
                } else {
                    result = Some(cqe.result());
                    more = cqe.flags() & CQE_F_MORE != 0;
                }
            }
        }
        match result {
            Some(res) if res == -libc::EINVAL => Err(SetupError::Refused(if self.fixed {
                "this kernel's SENDMSG_ZC refuses registered buffers or IORING_SEND_ZC_REPORT_USAGE (EINVAL; Linux 6.15 or later takes both)".to_string()
            } else {
                "this kernel's SENDMSG_ZC refuses IORING_SEND_ZC_REPORT_USAGE (EINVAL; Linux 6.2 or later takes it)"
                    .to_string()
            })),
            Some(res) if res == -libc::EOPNOTSUPP => Err(SetupError::Refused(
                "this kernel does not support SENDMSG_ZC here (EOPNOTSUPP)".to_string(),
            )),
            _ => Ok(()),
        }
    }

    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    pub fn is_free(&self, slot: usize) -> bool {
        self.tracker.is_free(slot)
    }

    pub fn is_queued(&self, slot: usize) -> bool {
        self.tracker.is_queued(slot)
    }

    /// Messages queued for the next chain.
    pub fn queued(&self) -> usize {
        self.chain.len()
    }

    pub fn counts(&self) -> RingCounts {
        RingCounts {
            enters: self.enters,
            cqe: self.tracker.counts.clone(),
        }
    }

    /// Hand every field of a slot no op references to `write`, in order, for writing the next
    /// message (no list is built: the send path allocates nothing). False, and nothing
    /// written, while the kernel may still read them.
    pub fn write_fields(&mut self, slot: usize, write: impl FnMut(&mut [u8])) -> bool {
        if !self.tracker.is_free(slot) {
            return false;
        }
        self.each_field(slot, write);
        true
    }

    /// Write over the fields of a slot whose send has returned — its result CQE reaped, the
    /// moment a sendmsg() would have returned — although for zero copy the kernel may still
    /// hold the pages until the notification: what the peer then receives may be the old
    /// bytes or the new ones, which is what the alias probe looks for (`Sender::rewrite`).
    /// Refused while the slot is queued or its result is due: the write would race the send
    /// itself, which no caller of a synchronous send could do.
    pub fn overwrite_sent(&mut self, slot: usize, write: impl FnMut(&mut [u8])) -> io::Result<()> {
        if slot >= self.slots.len() || self.tracker.is_queued(slot) || self.tracker.result_pending(slot) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("io_uring slot {slot} cannot be overwritten: its send has not returned"),
            ));
        }
        self.each_field(slot, write);
        Ok(())
    }

    /// `write` over each field of `slot`, in order; the callers decide whether they may.
    fn each_field(&mut self, slot: usize, mut write: impl FnMut(&mut [u8])) {
        let s = &mut self.slots[slot];
        if s.ranges.is_empty() {
            s.fields.iter_mut().for_each(|f| write(f));
            return;
        }
        let Some(&(first, _)) = s.ranges.first() else {
            return;
        };
        let total: usize = s.ranges.iter().map(|(_, n)| n).sum();
        let mut rest = &mut self.arena[first..first + total];
        for &(_, n) in &s.ranges {
            let (field, tail) = rest.split_at_mut(n);
            write(field);
            rest = tail;
        }
    }

    /// (address, length) of every non-empty buffer the kernel reads from: each slot's fields,
    /// or with fixed buffers the one arena.
    pub fn buffers(&self) -> Vec<(usize, usize)> {
        if self.fixed {
            return vec![(self.arena.addr(), self.arena.len())];
        }
        let fields = self.slots.iter().flat_map(|s| &s.fields);
        fields.filter(|f| !f.is_empty()).map(|f| (f.addr(), f.len())).collect()
    }

    fn build_entry(&self, slot: usize, fd: RawFd) -> squeue::Entry {
        let msg: *const libc::msghdr = &self.slots[slot].header.msg;
        let flags = (libc::MSG_WAITALL | libc::MSG_NOSIGNAL) as u32;
        let entry = if self.zero_copy {
            let ioprio = SEND_ZC_REPORT_USAGE | if self.fixed { RECVSEND_FIXED_BUF } else { 0 };
            // buf_index stays 0: the arena is the only registered buffer.
            opcode::SendMsgZc::new(types::Fd(fd), msg)
                .ioprio(ioprio)
                .flags(flags)
                .build()
        } else {
            opcode::SendMsg::new(types::Fd(fd), msg).flags(flags).build()
        };
        entry.user_data(slot as u64)
    }

    /// Put a free slot's whole message in the next chain, to be sent on `fd`. A full chain is
    /// submitted first.
    pub fn queue(&mut self, slot: usize, fd: RawFd, timeout: Duration) -> io::Result<()> {
        self.queue_bytes(slot, fd, self.message_len, timeout)
    }

    /// Like `queue`, for the first `len` bytes of the slot's fields (for messages of varying
    /// length in slots of the largest; 1 to `message_len`).
    pub fn queue_bytes(&mut self, slot: usize, fd: RawFd, len: usize, timeout: Duration) -> io::Result<()> {
        self.check_failure()?;
        if len == 0 || len > self.message_len || slot >= self.slots.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "io_uring send of {len} bytes from slot {slot}: accepted 1 to {} bytes, slots 0 to {}",
                    self.message_len,
                    self.slots.len() - 1
                ),
            ));
        }
        if self.chain.len() >= self.batch {
            self.submit(timeout)?;
        }
        if !self.tracker.queue(slot) {
            return Err(io::Error::other(format!(
                "io_uring slot {slot} is still in use by the kernel"
            )));
        }
        // The slot is free, so no op references its header: point it at the first len bytes.
        let s = &mut self.slots[slot];
        if s.expected != len {
            let h = &mut *s.header;
            h.iov.clear();
            let mut left = len;
            for v in &h.whole {
                if left == 0 {
                    break;
                }
                let n = v.iov_len.min(left);
                h.iov.push(libc::iovec {
                    iov_base: v.iov_base,
                    iov_len: n,
                });
                left -= n;
            }
            h.msg.msg_iov = h.iov.as_mut_ptr();
            h.msg.msg_iovlen = h.iov.len() as _;
            s.expected = len;
        }
        self.chain.push((slot, fd));
        Ok(())
    }

    /// Submit the queued messages as one linked chain and wait for their result CQEs (one
    /// io_uring_enter when they all complete at once). Notifications are collected as they
    /// come; wait for them with `wait_free` or `wait_idle`.
    pub fn submit(&mut self, timeout: Duration) -> io::Result<()> {
        if self.chain.is_empty() {
            return self.check_failure();
        }
        self.reap();
        let chain = std::mem::take(&mut self.chain);
        let last = chain.len() - 1;
        for (i, &(slot, fd)) in chain.iter().enumerate() {
            let mut entry = self.build_entry(slot, fd);
            if i < last {
                // The next send starts only when this one has queued all its bytes.
                entry = entry.flags(squeue::Flags::IO_LINK);
            }
            // SAFETY: the entry points at the slot's msghdr, iovecs and fields, all owned by
            // self and not moved or freed until the tracker has seen the op's last CQE (Drop
            // leaks them if the kernel never lets go); the msghdr and iovecs are rewritten
            // only while the slot is free (queue_bytes), the fields only after the op's
            // result (write_fields, overwrite_sent), and the kernel holds its own references
            // to the pages it still sends from.
            if unsafe { self.ring.submission().push(&entry) }.is_err() {
                return Err(io::Error::other("the io_uring submission queue is full"));
            }
            self.tracker.submitted(slot);
        }
        // Keep the Vec's capacity for the next chain.
        self.chain = chain;
        self.chain.clear();
        // The first wait takes the whole timeout without reading the clock (one message per
        // submission, as request/response sends, is then one io_uring_enter and nothing
        // else); only a wait that ends early starts a deadline, so the bound is 2 x timeout.
        self.enter_for(self.tracker.results_due(), timeout)?;
        self.reap();
        let mut deadline = None;
        while self.tracker.results_due() > 0 {
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("io_uring sends did not complete within {timeout:?}: the peer stopped reading"),
                ));
            }
            self.enter(self.tracker.results_due(), deadline)?;
            self.reap();
        }
        self.check_failure()
    }

    /// Wait until the kernel is done with `slot` (its result and, for zero copy, its
    /// notification). Ok(true) when that took a wait.
    pub fn wait_free(&mut self, slot: usize, timeout: Duration) -> io::Result<bool> {
        if self.tracker.is_queued(slot) {
            self.submit(timeout)?;
        }
        self.reap();
        if self.tracker.is_free(slot) {
            return self.check_failure().map(|()| false);
        }
        let deadline = Instant::now() + timeout;
        while !self.tracker.is_free(slot) {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "an io_uring zero-copy notification did not arrive within {timeout:?}: the peer stopped reading"
                    ),
                ));
            }
            self.enter(1, deadline)?;
            self.reap();
        }
        self.check_failure().map(|()| true)
    }

    /// Submit what is queued and wait until the kernel holds no slot.
    pub fn wait_idle(&mut self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        let submitted = self.submit(timeout);
        self.reap();
        while self.tracker.outstanding() > 0 {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} io_uring sends still held by the kernel after {timeout:?}",
                        self.tracker.outstanding()
                    ),
                ));
            }
            self.enter(1, deadline)?;
            self.reap();
        }
        submitted.and_then(|()| self.check_failure())
    }

    /// One io_uring_enter: submit whatever is in the SQ and wait (until `deadline`) for at
    /// least `want` CQEs.
    fn enter(&mut self, want: usize, deadline: Instant) -> io::Result<()> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        self.enter_for(want, left)
    }

    /// Submit what is queued and wait up to `left` for `want` completions.
    fn enter_for(&mut self, want: usize, left: Duration) -> io::Result<()> {
        let ts = types::Timespec::new().sec(left.as_secs()).nsec(left.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        self.enters += 1;
        #[cfg(test)]
        let entered = match self.fail_next_enter.take() {
            // The queued SQEs go to the kernel as in a real enter; only the wait fails.
            Some(errno) => self.ring.submit().and(Err(io::Error::from_raw_os_error(errno))),
            None => self.ring.submitter().submit_with_args(want, &args),
        };
        #[cfg(not(test))]
        let entered = self.ring.submitter().submit_with_args(want, &args);
        match entered {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => {
                // The first failure stays the cause; every later call reports it.
                if self.failure.is_none() {
                    self.failure = Some(Failure::Enter(e.raw_os_error().unwrap_or(libc::EIO)));
                }
                self.check_failure()
            }
        }
    }

    /// Apply every CQE ready now (no system call: the CQ is shared memory).
    fn reap(&mut self) {
        for cqe in self.ring.completion() {
            if matches!(cqe.user_data(), PROBE_TOKEN | CANCEL_TOKEN) {
                continue;
            }
            if let CqeEvent::Result { slot, res, .. } =
                self.tracker.complete(cqe.user_data(), cqe.result(), cqe.flags())
            {
                let expected = self.slots[slot].expected;
                let failure = if res < 0 {
                    Some(Failure::Errno(-res))
                } else if res as usize != expected {
                    Some(Failure::Short {
                        sent: res as usize,
                        len: expected,
                    })
                } else {
                    None
                };
                self.failure = cause(self.failure, failure);
            }
        }
    }

    fn check_failure(&self) -> io::Result<()> {
        match self.failure {
            None => Ok(()),
            Some(Failure::Errno(libc::ENOMEM)) if self.zero_copy => Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "io_uring SENDMSG_ZC failed: the pages it pins count against RLIMIT_MEMLOCK ({}), which is used up (ENOMEM); raise `ulimit -l`, run with CAP_IPC_LOCK, or use a smaller --zc-ring",
                    memlock_limit()
                ),
            )),
            Some(Failure::Errno(errno)) => {
                let err = io::Error::from_raw_os_error(errno);
                let op = if self.zero_copy { "SENDMSG_ZC" } else { "SENDMSG" };
                Err(io::Error::new(err.kind(), format!("io_uring {op} failed: {err}")))
            }
            Some(Failure::Short { sent, len }) => Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("io_uring send queued {sent} of {len} bytes despite MSG_WAITALL: the byte stream is broken"),
            )),
            Some(Failure::Enter(errno)) => {
                let err = io::Error::from_raw_os_error(errno);
                Err(io::Error::new(
                    err.kind(),
                    format!("io_uring_enter failed: {err}; the ring takes no more messages"),
                ))
            }
        }
    }
}

/// The ring's failure once `new` is seen after `kept`: the first failure, except that a
/// cancellation gives way. A chain's ops after the failed one end -ECANCELED, and their CQEs can
/// come before the failed op's (seen: SENDMSG_ZC over RLIMIT_MEMLOCK, ENOMEM reaped after the
/// chain's cancellations).
fn cause(kept: Option<Failure>, new: Option<Failure>) -> Option<Failure> {
    match (kept, new) {
        (None | Some(Failure::Errno(libc::ECANCELED)), Some(new)) => Some(new),
        (kept, _) => kept,
    }
}

/// Locked memory a SENDMSG_ZC of `len` bytes from unregistered memory is charged until its
/// notification: (len / page) + 2 pages (io_uring's io_notif_account_mem), against the user's
/// RLIMIT_MEMLOCK, shared by every ring and process of that user.
pub fn zero_copy_send_charge(len: usize) -> u64 {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as u64;
    (len as u64 / page + 2) * page
}

/// The RLIMIT_MEMLOCK budget io_uring zero-copy sends draw on, in bytes; None when they are
/// not charged (CAP_IPC_LOCK, as root) or the limit is unlimited.
pub fn zero_copy_memlock_budget() -> Option<u64> {
    const CAP_IPC_LOCK: u32 = 14;
    let effective = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))?
            .trim()
            .to_string();
        u64::from_str_radix(&hex, 16).ok()
    });
    if effective.is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0) {
        return None;
    }
    match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK) {
        Ok((soft, _)) if soft != libc::RLIM_INFINITY => Some(soft),
        _ => None,
    }
}

fn memlock_limit() -> String {
    match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK) {
        Ok((soft, _)) if soft == libc::RLIM_INFINITY => "unlimited".to_string(),
        Ok((soft, _)) => format!("{} KiB", soft / 1024),
        Err(_) => "unknown".to_string(),
    }
}

impl Drop for SendRing {
    fn drop(&mut self) {
        self.chain.clear();
        if self.tracker.outstanding() == 0 {
            return;
        }
        // Cancel what is still in flight and wait (bounded) for the kernel to let go; memory it
        // still holds after that is leaked rather than freed under it.
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_TOKEN);
        // SAFETY: a cancel op carries no pointer into our memory.
        let _ = unsafe { self.ring.submission().push(&cancel) };
        let deadline = Instant::now() + DROP_PATIENCE;
        while self.tracker.outstanding() > 0 && Instant::now() < deadline {
            if self
                .enter(1, deadline.min(Instant::now() + Duration::from_millis(50)))
                .is_err()
            {
                break;
            }
            self.reap();
        }
        if self.tracker.outstanding() > 0 {
            std::mem::forget(std::mem::take(&mut self.slots));
            std::mem::forget(std::mem::replace(&mut self.arena, AlignedBuf::zeroed(0, 1, 0)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COPIED: i32 = NOTIF_USAGE_ZC_COPIED as i32;

    #[test]
    fn a_result_with_more_holds_the_slot_until_its_notification() {
        let mut t = SlotTracker::new(2);
        assert!(t.queue(0));
        assert!(!t.queue(0), "a queued slot is not free");
        t.submitted(0);
        assert_eq!(t.results_due(), 1);
        assert_eq!(
            t.complete(0, 4000, CQE_F_MORE),
            CqeEvent::Result {
                slot: 0,
                res: 4000,
                more: true
            }
        );
        assert!(!t.is_free(0), "the kernel may still read the pages");
        assert_eq!((t.results_due(), t.outstanding()), (0, 1));
        assert_eq!(
            t.complete(0, COPIED, CQE_F_NOTIF),
            CqeEvent::Notification { slot: 0, copied: true }
        );
        assert!(t.is_free(0));
        assert_eq!(t.outstanding(), 0);
        assert_eq!(
            (t.counts.notifications, t.counts.copied, t.counts.zero_copied),
            (1, 1, 0)
        );
        // A notification without the usage bit: the pages went out by reference.
        t.queue(1);
        t.submitted(1);
        t.complete(1, 10, CQE_F_MORE);
        t.complete(1, 0, CQE_F_NOTIF);
        assert_eq!((t.counts.copied, t.counts.zero_copied), (1, 1));
        assert_eq!(t.counts.cqes, 4);
        assert_eq!(t.counts.sqes, 2);
        assert_eq!(t.counts.unexpected, 0);
    }

    /// The tallies kept as states change are what a scan of the states would count, through
    /// every path: results with and without F_MORE, notifications before and after results,
    /// CQEs that match nothing.
    #[test]
    fn the_kept_tallies_match_a_scan_of_the_states() {
        let scan = |t: &SlotTracker| {
            (
                t.states.iter().filter(|s| s.result_due()).count(),
                t.states.iter().filter(|s| s.outstanding()).count(),
            )
        };
        let mut t = SlotTracker::new(8);
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let slot = (rng % 8) as usize;
            match (rng >> 8) % 6 {
                0 => {
                    t.queue(slot);
                }
                1 => t.submitted(slot),
                2 => {
                    t.complete(slot as u64, 64, CQE_F_MORE);
                }
                3 => {
                    t.complete(slot as u64, 64, 0);
                }
                4 => {
                    t.complete(slot as u64, COPIED, CQE_F_NOTIF);
                }
                _ => {
                    t.complete(99, 0, 0);
                }
            }
            assert_eq!((t.results_due(), t.outstanding()), scan(&t));
        }
        assert!(t.counts.notifications > 0 && t.counts.results > 0, "{:?}", t.counts);
    }

    /// Seen on 6.18: a send to a closed peer fails with -EPIPE *and* F_MORE; its notification
    /// follows. Reusing the slot at the error would hand the kernel's pages back too early.
    #[test]
    fn an_error_with_more_still_waits_for_its_notification() {
        let mut t = SlotTracker::new(1);
        t.queue(0);
        t.submitted(0);
        assert_eq!(
            t.complete(0, -libc::EPIPE, CQE_F_MORE),
            CqeEvent::Result {
                slot: 0,
                res: -libc::EPIPE,
                more: true
            }
        );
        assert!(!t.is_free(0));
        t.complete(0, COPIED, CQE_F_NOTIF);
        assert!(t.is_free(0));
        assert_eq!(t.counts.failed_results, 1);
        // Its usage bit says nothing about the data path: not a copied send.
        assert_eq!((t.counts.after_error, t.counts.copied, t.counts.zero_copied), (1, 0, 0));
    }

    #[test]
    fn a_cancellation_gives_way_to_the_failure_that_caused_it() {
        let canceled = Some(Failure::Errno(libc::ECANCELED));
        let nomem = Some(Failure::Errno(libc::ENOMEM));
        assert_eq!(cause(None, canceled), canceled);
        assert_eq!(cause(canceled, nomem), nomem);
        assert_eq!(cause(nomem, canceled), nomem);
        assert_eq!(cause(nomem, Some(Failure::Errno(libc::EPIPE))), nomem);
        assert_eq!(cause(nomem, None), nomem);
    }

    #[test]
    fn a_result_without_more_frees_the_slot_at_once() {
        let mut t = SlotTracker::new(1);
        t.queue(0);
        t.submitted(0);
        t.complete(0, -libc::ECANCELED, 0);
        assert!(t.is_free(0));
        assert_eq!(t.outstanding(), 0);
        // SENDMSG (copying) results never have F_MORE either.
        t.queue(0);
        t.submitted(0);
        t.complete(0, 65536, 0);
        assert!(t.is_free(0));
        assert_eq!(t.counts.notifications, 0);
        assert_eq!(t.counts.results, 2);
    }

    #[test]
    fn a_notification_before_its_result_is_held_until_the_result() {
        let mut t = SlotTracker::new(1);
        t.queue(0);
        t.submitted(0);
        t.complete(0, 0, CQE_F_NOTIF);
        assert!(!t.is_free(0), "the result is still due");
        assert_eq!(t.results_due(), 1);
        t.complete(0, 100, CQE_F_MORE);
        assert!(t.is_free(0));
        assert_eq!((t.counts.notifications, t.counts.zero_copied), (1, 1));
    }

    #[test]
    fn stray_cqes_are_counted_not_trusted() {
        let mut t = SlotTracker::new(2);
        assert_eq!(t.complete(7, 1, 0), CqeEvent::Unexpected);
        assert_eq!(t.complete(0, 1, 0), CqeEvent::Unexpected, "slot 0 was never submitted");
        assert_eq!(t.complete(1, 0, CQE_F_NOTIF), CqeEvent::Unexpected);
        assert_eq!(t.counts.unexpected, 3);
        assert!(t.is_free(0) && t.is_free(1));
    }

    /// A peer that stopped reading: the wait for the results ends with an error within its
    /// timeout, and dropping the ring (cancel, bounded wait, leak what the kernel keeps) does
    /// not hang either.
    #[test]
    fn a_peer_that_stopped_reading_is_an_error_within_the_timeout() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_silent, _) = listener.accept().unwrap();
        for zero_copy in [false, true] {
            let pinned = 16 * zero_copy_send_charge(4 << 20);
            if zero_copy && zero_copy_memlock_budget().is_some_and(|budget| budget < pinned) {
                // Without CAP_IPC_LOCK, 64 MiB in flight would fail on RLIMIT_MEMLOCK instead.
                eprintln!("SKIPPED (zero copy): {pinned} bytes in flight exceed RLIMIT_MEMLOCK");
                continue;
            }
            let mut ring = SendRing::new(&SendRingConfig {
                slots: 16,
                field_sizes: vec![1 << 20; 4],
                batch: 16,
                zero_copy,
                fixed_buffers: false,
                align: 4096,
                offset: 0,
            })
            .unwrap_or_else(|_| panic!("no io_uring here"));
            let started = Instant::now();
            let patience = Duration::from_millis(300);
            let result = (0..16)
                .try_for_each(|slot| ring.queue(slot, client.as_raw_fd(), patience))
                .and_then(|()| ring.submit(patience));
            let err = result.expect_err("64 MiB cannot fit in the socket buffers of a silent peer");
            assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
            assert!(err.to_string().contains("stopped reading"), "{err}");
            assert!(ring.tracker.outstanding() > 0);
            drop(ring);
            assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        }
    }

    /// Messages of varying length from slots of the largest (what a records sender needs):
    /// each send carries exactly its prefix of the slot's fields, in order.
    #[test]
    fn prefixes_of_a_slot_go_out_whole_and_in_order() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for zero_copy in [false, true] {
            let mut ring = SendRing::new(&SendRingConfig {
                slots: 4,
                field_sizes: vec![100, 200],
                batch: 4,
                zero_copy,
                fixed_buffers: false,
                align: 4096,
                offset: 0,
            })
            .unwrap_or_else(|_| panic!("no io_uring here"));
            let lengths = [300usize, 1, 100, 150, 299, 300, 7, 200];
            let mut expected = Vec::new();
            for (i, &len) in lengths.iter().enumerate() {
                let slot = i % 4;
                ring.wait_free(slot, Duration::from_secs(5)).unwrap();
                let mut k = 0u8;
                assert!(ring.write_fields(slot, |field| {
                    for b in field.iter_mut() {
                        *b = (i as u8).wrapping_mul(31).wrapping_add(k);
                        k = k.wrapping_add(1);
                    }
                }));
                expected.extend((0..len).map(|k| (i as u8).wrapping_mul(31).wrapping_add(k as u8)));
                ring.queue_bytes(slot, client.as_raw_fd(), len, Duration::from_secs(5))
                    .unwrap();
            }
            ring.wait_idle(Duration::from_secs(5)).unwrap();
            let mut got = vec![0u8; expected.len()];
            server.read_exact(&mut got).unwrap();
            assert_eq!(got, expected, "zero_copy {zero_copy}");
            assert_eq!(ring.counts().cqe.results, lengths.len() as u64);
            // The alias probe's overwrite waits for the send to have returned.
            ring.queue_bytes(0, client.as_raw_fd(), 1, Duration::from_secs(5))
                .unwrap();
            assert!(ring.overwrite_sent(0, |_| {}).is_err(), "queued, not sent");
            assert!(!ring.write_fields(0, |_| {}));
            ring.submit(Duration::from_secs(5)).unwrap();
            ring.overwrite_sent(0, |f| f.fill(9)).unwrap();
            ring.wait_idle(Duration::from_secs(5)).unwrap();
            server.read_exact(&mut [0u8; 1]).unwrap();
            let err = ring
                .queue_bytes(0, client.as_raw_fd(), 301, Duration::from_secs(1))
                .unwrap_err();
            assert!(err.to_string().contains("accepted 1 to 300 bytes"), "{err}");
        }
    }

    /// An io_uring_enter that fails after submitting poisons the ring: the slot it submitted
    /// stays the kernel's (not handed out, not reused), every later call fails with the first
    /// error, and the op in flight still completes once (wait_idle reaps it).
    #[test]
    fn a_failed_enter_after_a_submit_poisons_the_ring() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            server.read_to_end(&mut got).map(|_| got)
        });
        let mut ring = SendRing::new(&SendRingConfig {
            slots: 2,
            field_sizes: vec![600, 400],
            batch: 2,
            zero_copy: false,
            fixed_buffers: false,
            align: 64,
            offset: 0,
        })
        .unwrap_or_else(|_| panic!("no io_uring here"));
        let patience = Duration::from_secs(5);
        let mut k = 0u8;
        assert!(ring.write_fields(0, |f| f.iter_mut().for_each(|b| {
            *b = k;
            k = k.wrapping_add(3);
        })));
        let sent: Vec<u8> = (0..1000u32).map(|i| (i * 3) as u8).collect();
        ring.queue(0, client.as_raw_fd(), patience).unwrap();
        ring.fail_next_enter = Some(libc::EFAULT);
        let err = ring.submit(patience).unwrap_err();
        assert!(err.to_string().contains("io_uring_enter failed"), "{err}");
        assert!(!ring.is_free(0), "the submitted slot stays the kernel's");
        assert!(!ring.write_fields(0, |_| {}));
        assert!(ring.overwrite_sent(0, |_| {}).is_err());
        let again = ring.queue(1, client.as_raw_fd(), patience).unwrap_err();
        assert_eq!((again.kind(), again.to_string()), (err.kind(), err.to_string()));
        assert_eq!(ring.counts().cqe.sqes, 1, "nothing more was submitted");
        let idle = ring.wait_idle(patience).unwrap_err();
        assert_eq!(idle.to_string(), err.to_string());
        assert!(ring.is_free(0), "the op in flight completed and was reaped");
        drop(client);
        assert_eq!(reader.join().unwrap().unwrap(), sent, "the one message, once");
    }

    #[test]
    fn a_refused_setup_says_why() {
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        assert!(setup_refusal(&eperm, Some(2))
            .unwrap()
            .contains("io_uring_disabled = 2"));
        assert!(setup_refusal(&eperm, Some(1)).unwrap().contains("io_uring_group"));
        assert!(setup_refusal(&eperm, None).unwrap().contains("not permitted"));
        let enosys = io::Error::from_raw_os_error(libc::ENOSYS);
        assert!(setup_refusal(&enosys, Some(0)).unwrap().contains("no io_uring"));
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(setup_refusal(&emfile, Some(0)), None);
    }
}
