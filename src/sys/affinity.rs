//! CPU placement: pin the calling thread, ask where it runs, list the CPUs it may use.

use std::io;

/// Pin the calling thread to the given CPUs (sched_setaffinity with tid 0).
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty CPU list"));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is its documented empty state (CPU_ZERO).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} out of range"),
            ));
        }
        // SAFETY: cpu is below CPU_SETSIZE, checked above, so CPU_SET stays inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: set is a valid, initialised cpu_set_t and the size passed is its size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs the calling thread is allowed to run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: as above, zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is writable and of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: i is below CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

/// The CPU the calling thread is running on right now (sched_getcpu), if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only returns a number or -1.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}
