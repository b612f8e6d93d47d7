//! Private network namespaces held by a file descriptor (never named under /run/netns, so
//! they die with the process, even on kill -9), entering one on a thread (setns() is per
//! thread; threads a thread starts inherit its namespace), bringing an interface up, and
//! whether this process may do any of it.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// A network namespace this process created; it lives as long as this handle (and any socket
/// or thread inside it) and no longer.
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
}

impl NetNs {
    /// Create a fresh network namespace with its loopback up. The work happens on a
    /// short-lived thread, so the caller's namespace never changes.
    pub fn new() -> io::Result<NetNs> {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("iopath-netns".into())
                .spawn_scoped(s, || -> io::Result<NetNs> {
                    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
                    let file = File::open("/proc/thread-self/ns/net")?;
                    set_up("lo")?;
                    Ok(NetNs { fd: file.into() })
                })?
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
        })
    }

    /// Move the calling thread into this namespace (for good: call it on a thread of its own).
    pub fn enter(&self) -> io::Result<()> {
        nix::sched::setns(self.fd.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
    }

    /// Run `f` on a new thread inside the namespace and return what it returned; threads `f`
    /// starts live there too.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("iopath-in-netns".into())
                .spawn_scoped(s, || -> io::Result<T> {
                    self.enter()?;
                    Ok(f())
                })?
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a thread inside the namespace panicked")))
        })
    }

    /// A path naming this namespace for other programs (`ip link ... netns PATH`).
    pub fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.fd.as_raw_fd())
    }

    /// The namespace's inode number, which names it in /proc/<tid>/ns/net links.
    #[cfg(test)]
    pub fn inode(&self) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        Ok(File::from(self.fd.try_clone()?).metadata()?.ino())
    }
}

/// Bring the interface `name` up in the calling thread's namespace (SIOCSIFFLAGS).
pub fn set_up(name: &str) -> io::Result<()> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads a NUL-terminated name from `req` and writes its flags into
    // the union; `req` lives across the call and the fd is a valid socket.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just filled ifru_flags (the union member SIOCGIFFLAGS writes).
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above; SIOCSIFFLAGS only reads `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process has the capabilities a namespace topology needs: CAP_SYS_ADMIN
/// (unshare a network namespace) and CAP_NET_ADMIN (create and configure links).
pub fn can_build_namespaces() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << CAP_NET_ADMIN) != 0 && eff & (1 << CAP_SYS_ADMIN) != 0
}

/// Whether the running kernel has a qdisc, from /proc/config.gz (`CONFIG_NAME=y` or `=m`);
/// None when the kernel does not publish its configuration.
pub fn kernel_config_has(option: &str) -> Option<bool> {
    use std::io::Read;
    let file = File::open("/proc/config.gz").ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).ok()?;
    Some(
        text.lines()
            .any(|l| l == format!("{option}=y") || l == format!("{option}=m")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_private_and_has_its_loopback_up() {
        if !can_build_namespaces() {
            return;
        }
        let ns = NetNs::new().unwrap();
        let here = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let inside = ns
            .run(|| std::fs::read_link("/proc/thread-self/ns/net").unwrap())
            .unwrap();
        assert_ne!(here, inside);
        assert!(inside.to_string_lossy().contains(&ns.inode().unwrap().to_string()));
        // Loopback works inside.
        let ok = ns
            .run(|| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                std::net::TcpStream::connect(l.local_addr().unwrap()).is_ok()
            })
            .unwrap();
        assert!(ok);
        // This thread's namespace did not change.
        assert_eq!(std::fs::read_link("/proc/thread-self/ns/net").unwrap(), here);
    }

    #[test]
    fn config_lookup_reads_this_kernel() {
        if let Some(has) = kernel_config_has("CONFIG_NET_NS") {
            assert!(has);
        }
    }
}
