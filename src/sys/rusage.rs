//! getrusage for the calling thread or the whole process.

use std::io;
use std::time::Duration;

/// The parts of `struct rusage` iopath uses.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub user: Duration,
    pub system: Duration,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
}

impl Usage {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
        }
    }
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::new(tv.tv_sec.max(0) as u64, (tv.tv_usec.max(0) as u32) * 1000)
}

fn get(who: libc::c_int) -> io::Result<Usage> {
    // SAFETY: rusage is plain data and zeroed is a valid value for it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a writable rusage; `who` is one of the RUSAGE_* constants.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Usage {
        user: timeval(ru.ru_utime),
        system: timeval(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
    })
}

/// Resource usage of the calling thread (RUSAGE_THREAD).
pub fn thread() -> io::Result<Usage> {
    get(libc::RUSAGE_THREAD)
}

/// Resource usage of the whole process (RUSAGE_SELF).
pub fn process() -> io::Result<Usage> {
    get(libc::RUSAGE_SELF)
}

/// Resource usage of reaped children (RUSAGE_CHILDREN).
pub fn children() -> io::Result<Usage> {
    get(libc::RUSAGE_CHILDREN)
}
