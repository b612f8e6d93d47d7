//! "Hosts" as network namespaces on a bridge that lives in a namespace of its own (never the
//! root namespace), for the fleet tests (tests/fleet.rs, tests/fleet_launcher.rs): host `i` is
//! the namespace `<tag>h<i>` with `eth0` at `<subnet>.<i+1>/24`, the bridge `br0` at
//! `<subnet>.254` in the namespace `<tag>b`. Tests that run at the same time use different tags
//! (with the pid in them) and subnets. Dropped (test passed or panicked) it deletes the
//! namespaces, which takes the veths and qdiscs with them: stop the processes in them first.
//! Needs root and iproute2.

use std::path::Path;
use std::process::Command;

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct Hosts {
    /// The bridge's namespace, where a controller runs.
    pub bridge: String,
    /// The hosts' namespaces.
    pub names: Vec<String>,
    /// Each host's address on the bridge (no port).
    pub addrs: Vec<String>,
}

impl Hosts {
    /// `n` hosts on a bridge in `<subnet>.0/24` (`subnet`: three octets, e.g. "198.19.77").
    pub fn build(tag: &str, subnet: &str, n: usize) -> Hosts {
        let bridge = format!("{tag}b");
        ip(&["netns", "add", &bridge]);
        // From here on a panic drops `hosts`, which deletes what was made so far.
        let mut hosts = Hosts {
            bridge: bridge.clone(),
            names: Vec::new(),
            addrs: Vec::new(),
        };
        ip(&["-n", &bridge, "link", "set", "lo", "up"]);
        ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &bridge, "addr", "add", &format!("{subnet}.254/24"), "dev", "br0"]);
        ip(&["-n", &bridge, "link", "set", "br0", "up"]);
        for i in 0..n {
            let host = format!("{tag}h{i}");
            ip(&["netns", "add", &host]);
            hosts.names.push(host.clone());
            let port = format!("v{i}");
            // The veth's host end is created directly inside the host's namespace.
            ip(&[
                "-n", &bridge, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &host,
            ]);
            ip(&["-n", &bridge, "link", "set", &port, "master", "br0", "up"]);
            let addr = format!("{subnet}.{}", i + 1);
            ip(&["-n", &host, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            ip(&["-n", &host, "link", "set", "eth0", "up"]);
            ip(&["-n", &host, "link", "set", "lo", "up"]);
            hosts.addrs.push(addr);
        }
        hosts
    }

    /// Every namespace: the hosts', then the bridge's.
    pub fn all(&self) -> Vec<String> {
        self.names.iter().chain([&self.bridge]).cloned().collect()
    }

    /// `ip netns exec NS PROGRAM`: a command to run in a namespace.
    pub fn exec(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in self.all() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
    }
}

/// The processes in a namespace now (`ip netns pids NS`).
pub fn pids_in(ns: &str) -> Vec<i32> {
    let out = Command::new("ip").args(["netns", "pids", ns]).output().expect("run ip");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether `ip netns list` still names the namespace.
pub fn listed(ns: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("run ip");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(ns))
}

/// (source, destination, round, concurrent_pairs, status, error) of every cell a fleet run
/// stored, in the order of its cases.
pub fn fleet_cells(db: &Path) -> Vec<(String, String, i64, i64, String, Option<String>)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut q = conn
        .prepare(
            "SELECT json_extract(c.case_json, '$.source'), json_extract(c.case_json, '$.destination'),
                    json_extract(c.case_json, '$.round'), json_extract(c.case_json, '$.concurrent_pairs'),
                    o.status, o.error
             FROM observations o JOIN cases c ON o.case_id = c.id ORDER BY c.position",
        )
        .unwrap();
    let rows = q
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The checks every all-pairs run over `n` hosts passes when it went well: `n·(n−1)` cells,
/// each directed pair once, all ok, rounds 1..=2·(n−1) of n/2 disjoint pairs (n even).
pub fn assert_all_pairs_ok(db: &Path, n: usize) {
    let stored = fleet_cells(db);
    assert_eq!(stored.len(), n * (n - 1), "{stored:?}");
    let mut directed: Vec<(String, String)> = stored.iter().map(|c| (c.0.clone(), c.1.clone())).collect();
    directed.sort();
    directed.dedup();
    assert_eq!(directed.len(), n * (n - 1), "every directed pair once");
    let rounds = 2 * (n as i64 - 1);
    for (source, destination, round, _, status, error) in &stored {
        assert_eq!(status, "ok", "{source} -> {destination}: {error:?}");
        assert_ne!(source, destination);
        assert!((1..=rounds).contains(round), "{source} -> {destination}: round {round}");
    }
    for round in 1..=rounds {
        let pairs: Vec<_> = stored.iter().filter(|c| c.2 == round).collect();
        assert_eq!(pairs.len(), n / 2, "round {round}");
        let hosts: std::collections::HashSet<_> = pairs.iter().flat_map(|c| [&c.0, &c.1]).collect();
        assert_eq!(hosts.len(), 2 * pairs.len(), "round {round}: its pairs are disjoint");
    }
}
