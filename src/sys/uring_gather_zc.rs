//! io_uring IORING_OP_SENDMSG_ZC of a gather list borrowed from memory that outlives the ring
//! (the record store's table, which nothing writes while it is sent): one op per send, its
//! result CQE awaited before the next op (so the msghdr and iovecs are free to rewrite), its
//! notification CQE — the kernel done with the pages — counted whenever it comes, with
//! IORING_SEND_ZC_REPORT_USAGE saying whether the kernel copied after all. `drain` waits for
//! every notification still due.
//!
//! The pages are borrowed for `'t`, which the ring cannot outlive; the kernel holds its own
//! page references while it sends, so this is about the data not changing, not memory safety.
//!
//! The msghdr and iovecs are another matter: the kernel reads them until the op's result CQE.
//! A wait that fails after a submit leaves that result due, so the ring is poisoned: every
//! later call fails with the first error, and nothing rewrites the msghdr or the iovecs (Drop
//! leaks them if the kernel has still not answered within its patience).

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
    /// The op submitted last has not had its result CQE: the kernel may still read msg and iov.
    result_due: bool,
    notifications_due: u64,
    /// The first wait that failed after a submit (its kind and text): every later call fails
    /// with it.
    poisoned: Option<(io::ErrorKind, String)>,
    pub counts: GatherZcCounts,
    /// Test hook: the next wait submits as usual, then fails with this errno.
    #[cfg(test)]
    fail_next_wait: Option<i32>,
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
            result_due: false,
            notifications_due: 0,
            poisoned: None,
            counts: GatherZcCounts::default(),
            #[cfg(test)]
            fail_next_wait: None,
            _pages: PhantomData,
        })
    }

    /// The first error of a poisoned ring, as every later call returns it.
    fn check_poisoned(&self) -> io::Result<()> {
        match &self.poisoned {
            None => Ok(()),
            Some((kind, text)) => Err(io::Error::new(*kind, text.clone())),
        }
    }

    /// A wait failed: with a result due, the kernel may still read the msghdr and the iovecs,
    /// so the ring takes no more sends. Returns the error to report.
    fn fail_wait(&mut self, err: io::Error) -> io::Error {
        if !self.result_due {
            return err;
        }
        let text = format!("io_uring_enter failed with a SENDMSG_ZC in flight ({err}): the ring takes no more sends");
        self.poisoned = Some((err.kind(), text.clone()));
        io::Error::new(err.kind(), text)
    }

    /// Send all of `bufs` on `fd`, in order, continuing after short sends; returns when the
    /// kernel has taken every byte (its notifications may come later). Fails at once with the
    /// first error once a wait has failed after a submit.
    pub fn send(&mut self, fd: RawFd, bufs: &[&'t [u8]]) -> io::Result<()> {
        self.check_poisoned()?;
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
            self.result_due = true;
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
                self.result_due = false;
                result = Some(cqe.result());
            }
        }
        result
    }

    /// Submit what is queued and wait for at least one CQE.
    fn enter_and_wait(&mut self) -> io::Result<usize> {
        #[cfg(test)]
        if let Some(errno) = self.fail_next_wait.take() {
            // The op goes to the kernel as in a real wait; only the wait fails.
            self.ring.submit()?;
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.ring.submit_and_wait(1)
    }

    /// Wait for the result CQE of the op just submitted (notifications may come first).
    fn wait_result(&mut self) -> io::Result<i32> {
        loop {
            self.counts.enters += 1;
            match self.enter_and_wait() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail_wait(e)),
            }
            if let Some(res) = self.reap() {
                return Ok(res);
            }
        }
    }

    /// Wait up to `timeout` until no notification is due (the kernel holds none of the pages).
    /// A poisoned ring waits for its result too, then still fails with its first error.
    pub fn drain(&mut self, timeout: Duration) -> io::Result<()> {
        self.settle(timeout)?;
        self.check_poisoned()
    }

    /// Wait up to `timeout` until the kernel holds nothing of ours: no result and no
    /// notification due.
    fn settle(&mut self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        self.reap();
        while self.notifications_due > 0 || self.result_due {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} io_uring zero-copy notifications{} still missing after {timeout:?}",
                        self.notifications_due,
                        if self.result_due { " and a send's result" } else { "" }
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
                Err(e) => return Err(self.fail_wait(e)),
            }
            self.reap();
        }
        Ok(())
    }
}

impl Drop for GatherZcRing<'_> {
    fn drop(&mut self) {
        if self.notifications_due > 0 || self.result_due {
            let _ = self.settle(DROP_PATIENCE);
        }
        if self.result_due {
            // The kernel may still read the msghdr and the iovecs: leak them rather than
            // free them under it.
            std::mem::forget(std::mem::take(&mut self.iov));
            // SAFETY: msghdr is plain data; zeroed means no name and no control data.
            let empty: libc::msghdr = unsafe { std::mem::zeroed() };
            std::mem::forget(std::mem::replace(&mut self.msg, Box::new(empty)));
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
        assert_eq!(ring.notifications_due, 0);
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

    /// A wait that fails after the submit leaves the op's result due: the ring is poisoned.
    /// The next send fails with the first error without touching the msghdr or the iovecs
    /// the kernel may still read, nothing more reaches the socket, and the op in flight still
    /// completes (its bytes arrive once, and drain reaps it).
    #[test]
    fn a_failed_wait_after_a_submit_poisons_the_ring() {
        let first: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let second = vec![0xAAu8; 4000];
        let mut ring = match GatherZcRing::new(8) {
            Ok(r) => r,
            Err(SetupError::Refused(why)) => return eprintln!("SKIPPED: {why}"),
            Err(SetupError::Failed(e)) => return eprintln!("SKIPPED: no io_uring here ({e})"),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).map(|_| got)
        });

        ring.fail_next_wait = Some(libc::EFAULT);
        let err = ring.send(tx.as_raw_fd(), &[&first]).unwrap_err();
        assert!(err.to_string().contains("takes no more sends"), "{err}");
        let iov: Vec<(usize, usize)> = ring.iov.iter().map(|v| (v.iov_base as usize, v.iov_len)).collect();
        assert_eq!(iov, [(first.as_ptr() as usize, first.len())]);

        let again = ring.send(tx.as_raw_fd(), &[&second]).unwrap_err();
        assert_eq!((again.kind(), again.to_string()), (err.kind(), err.to_string()));
        assert_eq!(ring.counts.sends, 1, "no second op was submitted");
        let still: Vec<(usize, usize)> = ring.iov.iter().map(|v| (v.iov_base as usize, v.iov_len)).collect();
        assert_eq!(still, iov, "the iovecs the kernel may read were left alone");
        assert_eq!(ring.msg.msg_iov, ring.iov.as_mut_ptr());

        let drained = ring.drain(Duration::from_secs(10)).unwrap_err();
        assert_eq!(drained.to_string(), err.to_string(), "still poisoned after the drain");
        assert!(!ring.result_due, "the op in flight completed and was reaped");
        drop(tx);
        let got = reader.join().unwrap().unwrap();
        assert_eq!(got, first, "the first send's bytes, once, and nothing of the second");
    }
}
