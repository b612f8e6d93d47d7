//! A network device's packet-size limits (gso/gro max sizes, their IPv4 variants, tso_max_size)
//! read and set over rtnetlink (RTM_GETLINK / RTM_NEWLINK with one attribute), in the calling
//! thread's namespace: a netlink socket belongs to the namespace it was opened in. iproute2
//! older than 6.3 has no keyword for the IPv4 variants; the kernel takes them all the same.

use std::io;
use std::io::Read;

use socket2::{Domain, Protocol, Socket, Type};

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_HDR: usize = 16;
const IFINFOMSG: usize = 16;

/// A size limit of a device, by its IFLA_* attribute of include/uapi/linux/if_link.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkSize {
    /// The largest GSO packet the stack builds for the device (IPv6, and IPv4 up to 64K).
    GsoMax,
    /// The largest packet GRO builds on the device (IPv6, and IPv4 up to 64K).
    GroMax,
    /// `gso_max_size` for IPv4 (Linux 6.3).
    GsoIpv4Max,
    /// `gro_max_size` for IPv4 (Linux 6.3).
    GroIpv4Max,
    /// The largest TSO packet the device takes (read only): the bound of the gso sizes.
    TsoMax,
}

impl LinkSize {
    /// Every limit, in the order `ip -d link` shows them.
    pub const ALL: [LinkSize; 5] = [
        LinkSize::GsoMax,
        LinkSize::GroMax,
        LinkSize::GsoIpv4Max,
        LinkSize::GroIpv4Max,
        LinkSize::TsoMax,
    ];

    fn attribute(self) -> u16 {
        match self {
            LinkSize::GsoMax => 41,
            LinkSize::GroMax => 58,
            LinkSize::TsoMax => 59,
            LinkSize::GsoIpv4Max => 63,
            LinkSize::GroIpv4Max => 64,
        }
    }

    /// Its name as `ip -d link` and the topology options spell it.
    pub fn name(self) -> &'static str {
        match self {
            LinkSize::GsoMax => "gso_max_size",
            LinkSize::GroMax => "gro_max_size",
            LinkSize::GsoIpv4Max => "gso_ipv4_max_size",
            LinkSize::GroIpv4Max => "gro_ipv4_max_size",
            LinkSize::TsoMax => "tso_max_size",
        }
    }

    /// The limit a name says (None: not a size of a device).
    pub fn named(name: &str) -> Option<LinkSize> {
        LinkSize::ALL.into_iter().find(|s| s.name() == name)
    }
}

fn index_of(device: &str) -> io::Result<i32> {
    let name = std::ffi::CString::new(device).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: if_nametoindex reads the NUL-terminated name, which lives across the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index as i32)
}

/// A request: the netlink header, an ifinfomsg for `index`, and the attributes.
fn request(kind: u16, flags: u16, index: i32, attributes: &[(u16, u32)]) -> Vec<u8> {
    let len = NLMSG_HDR + IFINFOMSG + attributes.len() * 8;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    m.extend_from_slice(&[0u8; 4]); // family, pad, type
    m.extend_from_slice(&index.to_ne_bytes());
    m.extend_from_slice(&[0u8; 8]); // flags, change
    for (kind, value) in attributes {
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&value.to_ne_bytes());
    }
    m
}

/// Send one request and return the kernel's first answer.
fn exchange(message: &[u8]) -> io::Result<Vec<u8>> {
    let socket = Socket::new(
        Domain::from(libc::AF_NETLINK),
        Type::RAW.cloexec(),
        Some(Protocol::from(libc::NETLINK_ROUTE)),
    )?;
    socket.send(message)?;
    let mut buf = vec![0u8; 64 << 10];
    let n = (&socket).read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The errno of an NLMSG_ERROR answer (0: the acknowledgement of success), None otherwise.
fn error_of(answer: &[u8]) -> Option<i32> {
    if u16_at(answer, 4)? != NLMSG_ERROR {
        return None;
    }
    Some(-(u32_at(answer, NLMSG_HDR)? as i32))
}

/// The device's size limits the kernel reports (a limit this kernel does not have is absent).
pub fn link_sizes(device: &str) -> io::Result<Vec<(LinkSize, u32)>> {
    let answer = exchange(&request(RTM_GETLINK, NLM_F_REQUEST, index_of(device)?, &[]))?;
    if let Some(errno) = error_of(&answer) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    let end = (u32_at(&answer, 0).unwrap_or(0) as usize).min(answer.len());
    let mut at = NLMSG_HDR + IFINFOMSG;
    let mut found = Vec::new();
    while at + 4 <= end {
        let (Some(len), Some(kind)) = (u16_at(&answer, at), u16_at(&answer, at + 2)) else {
            break;
        };
        let len = len as usize;
        if len < 4 {
            break;
        }
        if let Some(size) = LinkSize::ALL.into_iter().find(|s| s.attribute() == kind & 0x3fff) {
            if let Some(v) = u32_at(&answer, at + 4).filter(|_| len >= 8) {
                found.push((size, v));
            }
        }
        at += (len + 3) & !3;
    }
    Ok(found)
}

/// One limit of the device, or an error saying this kernel does not report it.
pub fn link_size(device: &str, size: LinkSize) -> io::Result<u32> {
    link_sizes(device)?
        .into_iter()
        .find(|(s, _)| *s == size)
        .map(|(_, v)| v)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("this kernel reports no {}", size.name()),
            )
        })
}

/// Set one limit of the device (the kernel refuses a value above `tso_max_size`: EINVAL).
pub fn set_link_size(device: &str, size: LinkSize, bytes: u32) -> io::Result<()> {
    if size == LinkSize::TsoMax {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "tso_max_size is the device's own",
        ));
    }
    let message = request(
        RTM_NEWLINK,
        NLM_F_REQUEST | NLM_F_ACK,
        index_of(device)?,
        &[(size.attribute(), bytes)],
    );
    match error_of(&exchange(&message)?) {
        Some(0) => Ok(()),
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Err(io::Error::other("rtnetlink sent no acknowledgement")),
    }
}
