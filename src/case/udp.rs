//! The choices every UDP workload shares (`net udp-stream`, `net udp-rr`): how datagrams are
//! handed to the kernel and how they are taken back.

use serde::{Deserialize, Serialize};

/// How datagrams are handed to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum UdpSendMode {
    /// send() of one contiguous buffer per datagram.
    Send,
    /// sendmsg() with the datagram's fields as a gather list, one call per datagram.
    Sendmsg,
    /// sendmmsg() of a batch of datagrams (`--batch`), each a gather list.
    Sendmmsg,
    /// One sendmsg() carrying many datagrams of one size (UDP_SEGMENT, generic segmentation
    /// offload): the kernel cuts the buffer into datagrams.
    Gso,
    /// sendmsg(MSG_ZEROCOPY) per datagram; a buffer is reused only after its completion.
    Zerocopy,
    /// io_uring SENDMSG per datagram, submitted in batches.
    Uring,
    /// io_uring SENDMSG_ZC per datagram, submitted in batches; a slot is reused only after
    /// its notification, which says whether the kernel copied after all.
    UringZc,
}

impl UdpSendMode {
    /// The modes that submit `--batch` datagrams per call.
    pub fn batches(self) -> bool {
        matches!(
            self,
            UdpSendMode::Sendmmsg | UdpSendMode::Gso | UdpSendMode::Uring | UdpSendMode::UringZc
        )
    }

    pub const ALL: [UdpSendMode; 7] = [
        UdpSendMode::Send,
        UdpSendMode::Sendmsg,
        UdpSendMode::Sendmmsg,
        UdpSendMode::Gso,
        UdpSendMode::Zerocopy,
        UdpSendMode::Uring,
        UdpSendMode::UringZc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UdpSendMode::Send => "send",
            UdpSendMode::Sendmsg => "sendmsg",
            UdpSendMode::Sendmmsg => "sendmmsg",
            UdpSendMode::Gso => "gso",
            UdpSendMode::Zerocopy => "zerocopy",
            UdpSendMode::Uring => "uring",
            UdpSendMode::UringZc => "uring-zc",
        }
    }
}

crate::choice::named_choices!(UdpSendMode, "UDP send mode");

/// How datagrams are taken back from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum UdpRecvMode {
    /// recv() of one datagram per call.
    Recv,
    /// recvmmsg() of a batch of datagrams (`--batch`).
    Recvmmsg,
    /// recvmsg() with UDP_GRO: the kernel coalesces datagrams of one flow into one buffer and
    /// says their size in a control message.
    Gro,
}

impl UdpRecvMode {
    pub const ALL: [UdpRecvMode; 3] = [UdpRecvMode::Recv, UdpRecvMode::Recvmmsg, UdpRecvMode::Gro];

    pub fn as_str(self) -> &'static str {
        match self {
            UdpRecvMode::Recv => "recv",
            UdpRecvMode::Recvmmsg => "recvmmsg",
            UdpRecvMode::Gro => "gro",
        }
    }
}

crate::choice::named_choices!(UdpRecvMode, "UDP receive mode");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_parses_back_from_its_name() {
        for mode in UdpSendMode::ALL {
            assert_eq!(mode.as_str().parse::<UdpSendMode>(), Ok(mode));
        }
        for mode in UdpRecvMode::ALL {
            assert_eq!(mode.as_str().parse::<UdpRecvMode>(), Ok(mode));
        }
        let err = "sendfile".parse::<UdpSendMode>().unwrap_err();
        assert_eq!(
            err,
            "unknown UDP send mode 'sendfile' (accepted: send, sendmsg, sendmmsg, gso, zerocopy, uring, uring-zc)"
        );
    }
}
