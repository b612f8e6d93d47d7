//! What `iopath net serve` serves: each network workload's hello kinds and its server-side
//! session function. The one file below the workloads that names them (and the only file
//! that names a workload's server): adding a network workload is one line here.

use super::server::Served;
use crate::net::workload::{records, rr, stream, udp_rr, udp_stream};

/// Every workload `net serve` runs sessions of, by the `workload` its hello names.
pub const NET_SERVE: &[Served] = &[
    stream::SERVED,
    rr::SERVED,
    records::SERVED,
    udp_stream::SERVED,
    udp_rr::SERVED,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of hello the protocol reads (`control::parse_hello`) is served, once.
    #[test]
    fn every_hello_kind_is_served_once() {
        let mut kinds: Vec<&str> = NET_SERVE.iter().flat_map(|s| s.hellos.iter().copied()).collect();
        kinds.sort_unstable();
        assert_eq!(kinds, ["crr", "records", "rr", "stream", "udp-rr", "udp-stream"]);
    }
}
