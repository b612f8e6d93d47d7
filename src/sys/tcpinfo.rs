//! TCP_INFO with the fields newer kernels return (libc's `tcp_info` stops at
//! `tcpi_total_retrans`): delivery rate, busy / rwnd-limited / sndbuf-limited times.

use std::os::fd::RawFd;

/// `struct tcp_info` of include/uapi/linux/tcp.h up to `tcpi_snd_wnd` (Linux 5.4+). Fields a
/// kernel does not fill stay zero; [`tcp_info`] says how many bytes it filled.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    /// Smoothed round-trip time, microseconds.
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    /// Bytes per second.
    pub delivery_rate: u64,
    /// Microseconds.
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
}

/// Byte offset just past `sndbuf_limited`: a kernel that filled this much reports the
/// limited times (Linux 4.10+).
pub const WITH_LIMITED_TIMES: usize = std::mem::offset_of!(TcpInfo, delivered);

/// TCP_INFO of a connected TCP socket, with the number of bytes the kernel filled.
pub fn tcp_info(fd: RawFd) -> std::io::Result<(TcpInfo, usize)> {
    let mut info = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: `info` is a plain repr(C) struct of `len` bytes that outlives the call; the
    // kernel writes at most `len` bytes into it and stores how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut TcpInfo).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((info, len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn layout_matches_the_kernel_and_a_connection_reports() {
        assert_eq!(std::mem::offset_of!(TcpInfo, rto), 8);
        assert_eq!(std::mem::offset_of!(TcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::size_of::<TcpInfo>(), 232);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (info, len) = tcp_info(c.as_raw_fd()).unwrap();
        assert!(len >= WITH_LIMITED_TIMES, "{len}");
        assert_eq!(info.state, 1); // TCP_ESTABLISHED
    }
}
