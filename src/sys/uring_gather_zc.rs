//! io_uring IORING_OP_SENDMSG_ZC of a gather list borrowed from memory that outlives the ring
//! (the record store's table, which nothing writes while it is sent): one op per send, its
//! result CQE awaited before the next op (so the msghdr and iovecs are free to rewrite), its
//! notification CQE — the kernel done with the pages — counted whenever it comes, with
//! IORING_SEND_ZC_REPORT_USAGE saying whether the kernel copied after all. `drain` waits for
//! every notification still due.
//!
//! The pages are borrowed for `'t`, which the ring cannot outlive; the kernel holds its own
//! page references while it sends, so this is about the data not changing, not memory safety.

use io_uring::{opcode, types, IoUring, Probe};
use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

// The ABI constants are the stream send ring's (uring_send.rs).
use super::uring_send::{CQE_F_MORE, CQE_F_NOTIF, NOTIF_USAGE_ZC_COPIED, SEND_ZC_REPORT_USAGE};
/// How long Drop waits for notifications still due.
const DROP_PATIENCE: Duration = Duration::from_secs(1);

/// What the ring did so far (monotonic).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GatherZcCounts {
    /// SENDMSG_ZC ops handed to the kernel (a short send takes another for the rest).
    pub sends: u64,
    /// io_uring_enter calls: the ring's only system calls once set up.
    pub enters: u64,
    /// Notifications received.
    pub notifications: u64,
    /// Of those, the ones that said the kernel copied the data.
    pub copied: u64,
}

/// Why a ring could not be set up.
#[derive(Debug)]
pub enum SetupError {
    /// The kernel lacks the feature: the reason, for the user.
    Refused(String),
    /// io_uring_setup or the probe failed (EPERM when io_uring is disabled, ENOSYS without it).
    Failed(io::Error),
}

pub struct GatherZcRing<'t> {
    ring: IoUring,
    /// Boxed: the SQE points at the msghdr, which points at the iovecs; neither moves or
    /// changes while an op's result is due.
    msg: Box<libc::msghdr>,
    iov: Vec<libc::iovec>,
    notifications_due: u64,
    pub counts: GatherZcCounts,
    _pages: PhantomData<&'t [u8]>,
}

// SAFETY: the raw pointers in msg and iov refer to self.iov and to pages borrowed for 't,
// both valid on any thread; the ring is used by one thread at a time (&mut self).
unsafe impl Send for GatherZcRing<'_> {}

impl<'t> GatherZcRing<'t> {
    /// A ring of `entries` SQEs, refused when this kernel has no SENDMSG_ZC.
    pub fn new(entries: u32) -> Result<GatherZcRing<'t>, SetupError> {
        let ring = IoUring::new(entries).map_err(SetupError::Failed)?;
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(SetupError::Failed)?;
        if !probe.is_supported(opcode::SendMsgZc::CODE) {
            return Err(SetupError::Refused(
                "this kernel has no IORING_OP_SENDMSG_ZC (Linux 6.1 or later)".into(),
            ));
        }
        // SAFETY: msghdr is plain data; zeroed means no name and no control data.
        let msg: libc::msghdr = unsafe { std::mem::zeroed() };
        Ok(GatherZcRing {
            ring,
            msg: Box::new(msg),
            iov: Vec::new(),
            notifications_due: 0,
            counts: GatherZcCounts::default(),
            _pages: PhantomData,
        })
    }

    /// Notifications still due: ops whose pages the kernel may still read.
    pub fn notifications_due(&self) -> u64 {
        self.notifications_due
    }

    /// Send all of `bufs` on `fd`, in order, continuing after short sends; returns when the
    /// kernel has taken every byte (its notifications may come later).
    pub fn send(&mut self, fd: RawFd, bufs: &[&'t [u8]]) -> io::Result<()> {
        self.iov.clear();
        self.iov
            .extend(bufs.iter().filter(|b| !b.is_empty()).map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            }));
        let mut first = 0;
        while first < self.iov.len() {
            self.msg.msg_iov = self.iov[first..].as_mut_ptr();
            self.msg.msg_iovlen = (self.iov.len() - first) as _;
            let entry = opcode::SendMsgZc::new(types::Fd(fd), &*self.msg as *const libc::msghdr)
                .ioprio(SEND_ZC_REPORT_USAGE)
                .flags((libc::MSG_NOSIGNAL | libc::MSG_WAITALL) as u32)
                .build()
                .user_data(1);
            // SAFETY: the entry points at self.msg, which points at self.iov[first..]; both
            // stay untouched until wait_result below has reaped this op's result, and the
            // pages they name are borrowed for 't, which outlives the ring.
            unsafe { self.ring.submission().push(&entry) }
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            self.counts.sends += 1;
            let res = self.wait_result()?;
            if res < 0 {
                let err = io::Error::from_raw_os_error(-res);
                if matches!(err.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock) {
                    continue;
                }
                return Err(err);
            }
            // Skip what went out; a partly sent iovec is shortened in place.
            let mut sent = res as usize;
            while sent > 0 && first < self.iov.len() {
                let v = &mut self.iov[first];
                if sent >= v.iov_len {
                    sent -= v.iov_len;
                    first += 1;
                } else {
                    // SAFETY: sent < iov_len, so the new base stays inside the same buffer.
                    v.iov_base = unsafe { v.iov_base.cast::<u8>().add(sent) }.cast();
                    v.iov_len -= sent;
                    sent = 0;
                }
            }
        }
        Ok(())
    }

    /// Apply every CQE available now; returns the result of the send op if it was among them.
    fn reap(&mut self) -> Option<i32> {
        let mut result = None;
        for cqe in self.ring.completion() {
            if cqe.flags() & CQE_F_NOTIF != 0 {
                self.notifications_due = self.notifications_due.saturating_sub(1);
                self.counts.notifications += 1;
                if cqe.result() as u32 & NOTIF_USAGE_ZC_COPIED != 0 {
                    self.counts.copied += 1;
                }
            } else {
                if cqe.flags() & CQE_F_MORE != 0 {
                    self.notifications_due += 1;
                }
                result = Some(cqe.result());
            }
        }
        result
    }

    /// Wait for the result CQE of the op just submitted (notifications may come first).
    fn wait_result(&mut self) -> io::Result<i32> {
        loop {
            self.counts.enters += 1;
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            if let Some(res) = self.reap() {
                return Ok(res);
            }
        }
    }

    /// Wait up to `timeout` until no notification is due (the kernel holds none of the pages).
    pub fn drain(&mut self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        self.reap();
        while self.notifications_due > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} io_uring zero-copy notifications still missing after {timeout:?}",
                        self.notifications_due
                    ),
                ));
            }
            let slice = left.min(Duration::from_millis(50));
            let ts = types::Timespec::new().sec(slice.as_secs()).nsec(slice.subsec_nanos());
            let args = types::SubmitArgs::new().timespec(&ts);
            self.counts.enters += 1;
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
                Err(e) => return Err(e),
            }
            self.reap();
        }
        Ok(())
    }
}

impl Drop for GatherZcRing<'_> {
    fn drop(&mut self) {
        if self.notifications_due > 0 {
            let _ = self.drain(DROP_PATIENCE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    /// Over loopback: the bytes arrive whole and in order, short sends included, and every
    /// notification comes back (copied, since loopback delivery copies).
    #[test]
    fn a_gather_list_arrives_whole_and_every_notification_comes_back() {
        // Declared before the ring: it borrows them for as long as it lives.
        let a: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let b = vec![7u8; 3000];
        let mut ring = match GatherZcRing::new(8) {
            Ok(r) => r,
            Err(SetupError::Refused(_)) => return,
            Err(SetupError::Failed(e)) if e.raw_os_error() == Some(libc::EPERM) => return,
            Err(SetupError::Failed(e)) => panic!("{e}"),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).unwrap();
            got
        });
        for _ in 0..20 {
            ring.send(tx.as_raw_fd(), &[&a, &b, &a[..5]]).unwrap();
        }
        ring.drain(Duration::from_secs(10)).unwrap();
        assert_eq!(ring.notifications_due(), 0);
        assert!(
            ring.counts.sends >= 20 && ring.counts.notifications >= 20,
            "{:?}",
            ring.counts
        );
        drop(tx);
        let got = reader.join().unwrap();
        let one: Vec<u8> = a.iter().chain(&b).chain(&a[..5]).copied().collect();
        assert_eq!(got.len(), one.len() * 20);
        assert!(got.chunks(one.len()).all(|c| c == one.as_slice()));
    }
}
