//! A network device's offloads (GRO, GSO, TSO) read and switched with the legacy ETHTOOL
//! ioctl (SIOCETHTOOL with ETHTOOL_G*/S* and a `struct ethtool_value`), in the calling
//! thread's namespace: what `ethtool -k`/`-K` do, without the `ethtool` binary.

use std::io;
use std::os::fd::AsRawFd;

const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// An offload the ioctl reads and sets by one command pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    Gro,
    Gso,
    Tso,
}

impl Offload {
    /// (get, set) commands of include/uapi/linux/ethtool.h.
    fn commands(self) -> (u32, u32) {
        match self {
            Offload::Tso => (0x1e, 0x1f),
            Offload::Gso => (0x23, 0x24),
            Offload::Gro => (0x2b, 0x2c),
        }
    }
}

/// `struct ethtool_value` of the uapi header.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// One SIOCETHTOOL call on `device` with `value` (read and written by the kernel).
fn call(device: &str, value: &mut EthtoolValue) -> io::Result<()> {
    if device.is_empty() || device.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"));
    }
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(device.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (value as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL reads the NUL-terminated name and the pointer in `req`, and reads and
    // writes the `EthtoolValue` it points to; both live on this frame across the call, and the
    // fd is a valid socket.
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a device named `device` exists in the calling thread's namespace (sysfs may show
/// another namespace's devices; if_nametoindex asks the kernel for this one's).
pub fn device_exists(device: &str) -> bool {
    let Ok(name) = std::ffi::CString::new(device) else {
        return false;
    };
    // SAFETY: `name` is a NUL-terminated string that lives across the call, which only reads it.
    unsafe { libc::if_nametoindex(name.as_ptr()) != 0 }
}

/// Whether `offload` is on for `device`.
pub fn offload(device: &str, offload: Offload) -> io::Result<bool> {
    let mut value = EthtoolValue {
        cmd: offload.commands().0,
        data: 0,
    };
    call(device, &mut value)?;
    Ok(value.data != 0)
}

/// Switch `offload` on or off for `device` (needs CAP_NET_ADMIN in its namespace).
pub fn set_offload(device: &str, offload: Offload, on: bool) -> io::Result<()> {
    let mut value = EthtoolValue {
        cmd: offload.commands().1,
        data: on as u32,
    };
    call(device, &mut value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_answers_and_a_missing_device_is_an_error() {
        // Reading needs no privilege; lo exists in every namespace.
        assert!(offload("lo", Offload::Gso).is_ok());
        assert!(offload("iopath-none0", Offload::Gro).is_err());
        assert!(offload("", Offload::Gro).is_err());
        assert!(device_exists("lo"));
        assert!(!device_exists("iopath-none0"));
    }
}
