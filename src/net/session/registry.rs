//! What `iopath net serve` serves: each network workload's hello kinds, its decoding of them
//! and its server-side session. The one file below the workloads that names them (and the
//! only file that names a workload's server): adding a network workload is one line here.
//! The session server reads a hello through this list (`served::decode_hello`), and refuses
//! an unknown workload with the list's kinds.

use super::served::Served;
use crate::net::workload::{load, records, rr, stream, udp_rr, udp_stream};

/// Every workload `net serve` runs sessions of, by the `workload` its hello names.
pub const NET_SERVE: &[Served] = &[
    stream::SERVED,
    rr::SERVED,
    records::SERVED,
    udp_stream::SERVED,
    udp_rr::SERVED,
    load::SERVED,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{RrCase, StreamCase};
    use crate::net::control::{HelloError, PROTOCOL_VERSION};
    use crate::net::session::served::decode_hello;
    use crate::net::workload::rr::RrHello;

    /// Every kind of hello in the registry is served by one entry, and a hello naming it
    /// reaches that entry's decoding (a hello without a case is refused as a bad hello of that
    /// workload, never as an unknown one); any other name is refused naming the registry's
    /// kinds.
    #[test]
    fn every_hello_kind_is_served_once() {
        let kinds: Vec<&str> = NET_SERVE.iter().flat_map(|s| s.hellos.iter().copied()).collect();
        for kind in &kinds {
            assert_eq!(kinds.iter().filter(|k| *k == kind).count(), 1, "{kind} is served twice");
            let line = format!(r#"{{"type":"hello","version":{PROTOCOL_VERSION},"workload":"{kind}"}}"#);
            match decode_hello(line.as_bytes(), NET_SERVE) {
                Err(HelloError::Malformed(e)) => assert!(e.starts_with(&format!("bad {kind} hello")), "{kind}: {e}"),
                other => panic!("{kind}: {:?}", other.map(|h| h.workload())),
            }
        }
        let line = format!(r#"{{"type":"hello","version":{PROTOCOL_VERSION},"workload":"udp"}}"#);
        assert_eq!(
            decode_hello(line.as_bytes(), NET_SERVE).map(|h| h.workload()),
            Err(HelloError::Malformed(format!(
                "unknown workload \"udp\" (this server serves {})",
                kinds.join(", ")
            )))
        );
    }

    /// Issue 33: every network command of the CLI (`net <w>` but `serve`, walked from clap's
    /// own tree) is a hello `net serve` answers. A workload's in-process server serves itself,
    /// so without this a workload missing from `NET_SERVE` would pass every local run and be
    /// refused only by a remote `net serve`.
    #[test]
    fn every_network_command_of_the_cli_is_served() {
        let kinds: Vec<&str> = NET_SERVE.iter().flat_map(|s| s.hellos.iter().copied()).collect();
        let commands = crate::cli::measuring_commands(true);
        let network: Vec<&str> = commands.iter().filter_map(|c| c.strip_prefix("net ")).collect();
        assert!(network.len() >= 6, "{commands:?}");
        for workload in network {
            assert!(
                kinds.contains(&workload),
                "`net {workload}` has no entry in NET_SERVE (served: {kinds:?})"
            );
        }
    }

    /// A hello names its workload; one without the field is a stream hello, as before.
    #[test]
    fn a_hello_names_its_workload_and_an_old_one_is_a_stream() {
        use crate::case::{CopyMode, RrKind};
        let rr = RrCase {
            kind: RrKind::Crr,
            mode: CopyMode::OneCopy,
            rx_mode: crate::case::RxMode::Scatter,
            request_size: 64,
            response_size: 128,
            fields: 1,
            inflight: 1,
            net: crate::case::NetParams {
                threads: 2,
                duration_ms: 1000,
                verify: true,
                ..crate::case::NetParams::for_test()
            },
            rate: None,
            align: crate::case::Align::Page,
            rx_wake: crate::case::RxWake::Data,
        };
        let line = serde_json::to_vec(&RrHello::new(&rr)).unwrap();
        assert_eq!(decode_hello(&line, NET_SERVE).unwrap().case::<RrCase>(), Some(&rr));
        let text = String::from_utf8(line).unwrap();
        assert!(text.contains(r#""workload":"crr""#), "{text}");
        let mismatched = text.replace(r#""workload":"crr""#, r#""workload":"rr""#);
        assert!(matches!(
            decode_hello(mismatched.as_bytes(), NET_SERVE).map(|h| h.workload()),
            Err(HelloError::Malformed(_))
        ));
        let unknown = text.replace(r#""workload":"crr""#, r#""workload":"udp""#);
        match decode_hello(unknown.as_bytes(), NET_SERVE).map(|h| h.workload()) {
            Err(HelloError::Malformed(e)) => assert!(
                e.starts_with("unknown workload \"udp\" (this server serves stream, rr, crr, "),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
        let stream = StreamCase {
            mode: CopyMode::TwoCopy,
            rx_mode: crate::case::RxMode::Copy,
            size: 4096,
            fields: 1,
            net: crate::case::NetParams {
                perf: true,
                ..crate::case::NetParams::for_test()
            },
            prove_copies: false,
            zc_ring: None,
            fixed_buffers: false,
            align: crate::case::Align::Page,
            rx_wake: crate::case::RxWake::Message,
            clients: 1,
        };
        let old = serde_json::to_vec(&crate::net::workload::stream::StreamHello::new(stream.clone())).unwrap();
        assert!(!String::from_utf8_lossy(&old).contains("workload"));
        let decoded = decode_hello(&old, NET_SERVE).unwrap();
        assert_eq!(
            (decoded.workload(), decoded.case::<StreamCase>()),
            ("stream", Some(&stream))
        );
    }

    /// A version-2 client's hello has no rx_mode: it is served with the receiver it always had.
    #[test]
    fn a_version_2_hello_is_served_with_the_old_pairing() {
        let v2 = br#"{"type":"hello","version":2,"case":{"mode":"two-copy","size":1024,"fields":8,"threads":1,"duration_ms":100,"warmup_ms":0,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":true}}"#;
        let decoded = decode_hello(v2, NET_SERVE).unwrap();
        let case = decoded.case::<StreamCase>().expect("a stream hello");
        assert_eq!(case.rx_mode, crate::case::RxMode::Copy);
    }
}
