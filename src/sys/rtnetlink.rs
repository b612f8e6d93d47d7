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
const NLM_F_ECHO: u16 = 0x8;
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

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
/// struct tcmsg: family, 3 pad bytes, ifindex, handle, parent, info.
const TCMSG: usize = 20;
const TC_H_ROOT: u32 = 0xffff_ffff;
const TCA_KIND: u16 = 1;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
/// A type's flag bits (NLA_F_NESTED, NLA_F_NET_BYTEORDER) are not part of it.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// How long a qdisc read waits for the kernel's answer (an ignored root, such as veth's
/// `noqueue`, is answered with nothing).
const QDISC_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A root qdisc's counters since it was made (struct gnet_stats_basic and gnet_stats_queue of
/// include/uapi/linux/gen_stats.h), what `tc -s qdisc` prints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QdiscStats {
    /// `tbf`, `netem`, …
    pub kind: String,
    pub sent_bytes: u64,
    pub sent_packets: u32,
    /// Bytes and packets waiting in the queue now.
    pub backlog_bytes: u32,
    pub backlog_packets: u32,
    /// Packets the qdisc dropped, and times it held one back for lack of tokens.
    pub drops: u32,
    pub overlimits: u32,
}

/// Reads a device's root qdisc over a netlink socket of the namespace it was opened in (a
/// netlink socket stays in its namespace whichever thread uses it later), so a window's edges
/// cost one request each and no process.
pub struct QdiscReader {
    socket: Socket,
    index: i32,
    sequence: std::sync::atomic::AtomicU32,
}

impl QdiscReader {
    /// Open the reader in the calling thread's namespace, where `device` lives.
    pub fn open(device: &str) -> io::Result<QdiscReader> {
        let index = index_of(device)?;
        let socket = Socket::new(
            Domain::from(libc::AF_NETLINK),
            Type::RAW.cloexec(),
            Some(Protocol::from(libc::NETLINK_ROUTE)),
        )?;
        socket.set_read_timeout(Some(QDISC_WAIT))?;
        Ok(QdiscReader {
            socket,
            index,
            sequence: std::sync::atomic::AtomicU32::new(1),
        })
    }

    /// The root qdisc's counters now.
    pub fn read(&self) -> io::Result<QdiscStats> {
        let sequence = self.sequence.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let len = NLMSG_HDR + TCMSG;
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_GETQDISC.to_ne_bytes());
        // A get of one qdisc is answered as a notification: only to the groups, unless the
        // request asks for its echo.
        m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ECHO).to_ne_bytes());
        m.extend_from_slice(&sequence.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[0u8; 4]); // family, pad
        m.extend_from_slice(&self.index.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes()); // handle: whichever the root has
        m.extend_from_slice(&TC_H_ROOT.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        self.socket.send(&m)?;
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = (&self.socket).read(&mut buf)?;
            let answer = &buf[..n];
            if let Some(errno) = error_of(answer).filter(|&e| e != 0) {
                return Err(io::Error::from_raw_os_error(errno));
            }
            // Answers to an earlier read that timed out may still be queued: skip them.
            if u16_at(answer, 4) == Some(RTM_NEWQDISC) && u32_at(answer, 8) == Some(sequence) {
                return Ok(qdisc_stats(answer));
            }
        }
    }
}

/// The attributes between `at` and `end` of a netlink message: (type, payload).
fn attributes(b: &[u8], mut at: usize, end: usize) -> Vec<(u16, &[u8])> {
    let mut found = Vec::new();
    while at + 4 <= end {
        let (Some(len), Some(kind)) = (u16_at(b, at), u16_at(b, at + 2)) else {
            break;
        };
        let len = len as usize;
        if len < 4 || at + len > end {
            break;
        }
        found.push((kind & NLA_TYPE_MASK, &b[at + 4..at + len]));
        at += (len + 3) & !3;
    }
    found
}

/// The counters of an RTM_NEWQDISC message (absent ones read 0).
fn qdisc_stats(answer: &[u8]) -> QdiscStats {
    let end = (u32_at(answer, 0).unwrap_or(0) as usize).min(answer.len());
    let mut stats = QdiscStats::default();
    for (kind, payload) in attributes(answer, NLMSG_HDR + TCMSG, end) {
        match kind {
            TCA_KIND => {
                let name = payload.split(|&b| b == 0).next().unwrap_or_default();
                stats.kind = String::from_utf8_lossy(name).into_owned();
            }
            TCA_STATS2 => {
                for (inner, p) in attributes(payload, 0, payload.len()) {
                    let u32_of = |at: usize| u32_at(p, at).unwrap_or(0);
                    match inner {
                        TCA_STATS_BASIC => {
                            stats.sent_bytes = p
                                .get(..8)
                                .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or_default()));
                            stats.sent_packets = u32_of(8);
                        }
                        TCA_STATS_QUEUE => {
                            stats.backlog_packets = u32_of(0);
                            stats.backlog_bytes = u32_of(4);
                            stats.drops = u32_of(8);
                            stats.overlimits = u32_of(16);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    stats
}
