//! The charts of `net udp-rr` runs: the client's p50 and p99 latency and the share of
//! transactions lost against request size, a line per send/receive mode pair (coloured and
//! styled as udp-stream's charts), a panel per everything else (response size, in flight,
//! threads, rate, receive buffer). `rr_figures` takes `net rr`'s case and copy modes only.

use super::cells::CellSummary;
use super::charts::ChartSpec;
use super::udp_figures::mode_pair_figures;
use crate::case::{format_bytes, UdpRrCase};
use crate::observation::names;
use crate::observation::Role;

/// What a case is apart from its modes and request size: the panel.
fn panel(c: &UdpRrCase) -> String {
    let mut text = format!(
        "resp {} n{} t{}",
        format_bytes(c.response_size),
        c.inflight,
        c.net.threads
    );
    if let Some(rate) = c.rate {
        text.push_str(&format!(" @{rate}/s"));
    }
    if let Some(rcvbuf) = c.rcvbuf {
        text.push_str(&format!(" rcvbuf {}", format_bytes(rcvbuf)));
    }
    text
}

pub fn udp_rr_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    mode_pair_figures::<UdpRrCase>(
        cells,
        |c| (c.mode, c.rx_mode, panel(c), c.request_size as f64),
        (Role::Client, "request size (bytes, log scale)"),
        &[
            (
                (
                    "udp_rr_p50_vs_size",
                    "UDP request/response p50 latency vs request size",
                    "latency (us)",
                    "y: client latency_p50_us (request sent, open loop: due, to its reply; answered transactions only)",
                ),
                names::LATENCY_P50_US,
                None,
            ),
            (
                (
                    "udp_rr_p99_vs_size",
                    "UDP request/response p99 latency vs request size",
                    "latency (us)",
                    "y: client latency_p99_us (answered transactions only)",
                ),
                names::LATENCY_P99_US,
                None,
            ),
            (
                (
                    "udp_rr_lost_vs_size",
                    "UDP transactions lost vs request size",
                    "share of transactions lost",
                    "y: client txn_lost_fraction (requests with no reply within the loss timeout / answered + lost, in the window)",
                ),
                names::TXN_LOST_FRACTION,
                Some((0.0, 1.0)),
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_name_what_is_not_on_the_axes() {
        let case = UdpRrCase {
            mode: crate::case::UdpSendMode::Send,
            rx_mode: crate::case::UdpRecvMode::Recv,
            request_size: 64,
            response_size: 1024,
            inflight: 4,
            rate: Some(500),
            loss_timeout_ms: 200,
            rcvbuf: Some(4096),
            net: crate::case::NetParams {
                threads: 2,
                ..crate::case::NetParams::for_test()
            },
        };
        assert_eq!(panel(&case), "resp 1KiB n4 t2 @500/s rcvbuf 4KiB");
        assert!(udp_rr_figures(&[]).is_empty());
    }
}
