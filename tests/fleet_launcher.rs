//! A real launcher end to end (issue 23): four "hosts" as network namespaces on a bridge in a
//! namespace of its own, an sshd in each, and the recipe deploy/ssh/pdsh.sh run from the
//! bridge's namespace as a site runs it: pdsh over ssh starts an agent on every host of the
//! hosts file, then the controller measures all pairs; the recipe's stop line ends them. Needs
//! root, iproute2, pdsh and OpenSSH (sshd, ssh, ssh-keygen; scripts/test installs them as
//! root): without root or a tool it records a skip that says which.

mod common;

use common::netns::{is_root, pids_in, Hosts};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HOSTS: usize = 4;
const SSHD: &str = "/usr/sbin/sshd";

/// The namespaces, an sshd in each host's, and whatever the launcher started in them. Dropped
/// (test passed or panicked) it kills the sshd, then every process still in its namespaces
/// (the agents), reaps them, and its `hosts` delete the namespaces.
struct Launch {
    hosts: Hosts,
    sshd: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Launch {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn stop_sshd(&mut self) {
        for mut child in self.sshd.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `bash deploy/ssh/pdsh.sh ARGS` in the bridge's namespace, with pdsh's ssh module and the
    /// test's client key, iopath as built for the tests, the key and the agents' files in the
    /// test's folder.
    fn recipe(&self, args: &[&Path]) -> Command {
        let ssh = format!(
            "-F /dev/null -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
             -o LogLevel=ERROR -l%u %h",
            self.file("client_key").display()
        );
        let mut cmd = Hosts::exec(&self.hosts.bridge, "bash");
        cmd.arg("deploy/ssh/pdsh.sh")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("PDSH_RCMD_TYPE", "ssh")
            .env("PDSH_SSH_ARGS", ssh)
            .env("IOPATH", common::bin())
            .env("IOPATH_PSK", self.file("psk"))
            .env("IOPATH_AGENT_DIR", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        self.stop_sshd();
        // What is left in the test's own namespaces is the test's (the agents, reparented to
        // this process, the subreaper): kill and reap it.
        for ns in self.hosts.all() {
            for pid in pids_in(&ns) {
                let pid = Pid::from_raw(pid);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = waitpid(pid, None);
            }
        }
    }
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .expect("run ssh-keygen");
    assert!(
        out.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Wait until the file holds `text`; panics with the file after `limit`.
fn wait_for_text(path: &Path, text: &str, limit: Duration) {
    let start = Instant::now();
    while !std::fs::read_to_string(path).unwrap_or_default().contains(text) {
        assert!(
            start.elapsed() < limit,
            "{} does not say {text:?} after {limit:?}: {}",
            path.display(),
            std::fs::read_to_string(path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the process `pid` is an iopath that has not exited (a zombie has exited).
fn is_running_iopath(pid: i32) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command's closing parenthesis.
    let state = stat.rsplit(')').next().unwrap_or_default().trim_start().chars().next();
    comm.trim() == "iopath" && state.is_some_and(|s| s != 'Z')
}

/// Whether the agent `pid` is gone: exited and reaped here (it is this process's child once the
/// shell that started it ends: the test is a subreaper), or no running iopath any more.
fn agent_gone(pid: i32) -> bool {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) => true,
        Err(_) => !is_running_iopath(pid),
    }
}

/// The inode of a network namespace: of a process (/proc/PID/ns/net) or a named one
/// (/run/netns/NAME).
fn netns_inode(path: &str) -> u64 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}")).ino()
}

#[test]
fn pdsh_over_ssh_starts_an_agent_per_host_the_fleet_measures_every_pair_and_the_stop_line_ends_them() {
    if !is_root() {
        common::skip("needs root to build namespaces and run sshd in them");
        return;
    }
    if let Some(why) = ["pdsh", SSHD, "ssh", "ssh-keygen", "ip"]
        .into_iter()
        .find_map(common::missing_program)
    {
        return common::skip(&why);
    }
    // The agents outlive the shells that start them: they become this process's children, so
    // the test reaps them itself (whatever this container's pid 1 does with orphans).
    nix::sys::prctl::set_child_subreaper(true).expect("become a subreaper");
    // sshd's privilege separation needs it.
    std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");

    let tag = format!("iopl{}", std::process::id() % 100_000);
    let mut launch = Launch {
        hosts: Hosts::build(&tag, "198.19.78", HOSTS),
        sshd: Vec::new(),
        dir: tempfile::tempdir().expect("temp dir"),
    };
    keygen(&launch.file("host_key"));
    keygen(&launch.file("client_key"));
    std::fs::copy(launch.file("client_key.pub"), launch.file("authorized_keys")).unwrap();
    std::fs::write(launch.file("psk"), "launcher-test-key-0123456789abcdef\n").unwrap();
    let addrs: Vec<String> = launch.hosts.addrs.iter().map(|a| format!("{a}:7000")).collect();
    let list: String = addrs.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(
        launch.file("hosts"),
        format!("# one sshd and one agent per namespace\n{list}"),
    )
    .unwrap();

    for i in 0..HOSTS {
        let log = launch.file(&format!("sshd{i}.log"));
        let addr = launch.hosts.addrs[i].clone();
        let option = |o: &str, v: &Path| format!("{o}={}", v.display());
        let child = Hosts::exec(&launch.hosts.names[i], SSHD)
            .args(["-D", "-e", "-f", "/dev/null"])
            .args(["-o", &option("HostKey", &launch.file("host_key"))])
            .args(["-o", &option("AuthorizedKeysFile", &launch.file("authorized_keys"))])
            .args(["-o", "StrictModes=no", "-o", "PidFile=none", "-o", "UsePAM=no"])
            .args(["-o", &format!("ListenAddress={addr}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start sshd");
        launch.sshd.push(child);
        wait_for_text(&log, &format!("Server listening on {addr}"), Duration::from_secs(30));
    }

    // The recipe: pdsh starts the agents over ssh, then the controller runs all pairs.
    let (_db_dir, db) = common::temp_db("fleet.db");
    let flags = [
        "--mode",
        "two-copy",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--concurrent-pairs",
        "2",
        "--reps",
        "1",
        "--seed",
        "3",
    ]
    .map(Path::new);
    let mut args = vec![launch.file("hosts"), db.clone()];
    args.extend(flags.iter().map(|f| f.to_path_buf()));
    let args: Vec<&Path> = args.iter().map(PathBuf::as_path).collect();
    let out = common::finish_within(
        launch.recipe(&args).spawn().expect("run the recipe"),
        Duration::from_secs(300),
    );
    let err = common::stderr(&out);
    assert!(out.status.success(), "pdsh.sh: {err}");
    assert!(
        err.contains("fleet: 4 hosts, pairs all, 6 rounds of up to 2 disjoint pairs, 12 cells"),
        "the controller announced its plan: {err}"
    );
    common::netns::assert_all_pairs_ok(&db, HOSTS);
    let cells = common::netns::fleet_cells(&db);
    assert!(
        cells.iter().all(|c| addrs.contains(&c.0) && addrs.contains(&c.1)),
        "{cells:?}"
    );

    // Each host's agent: the pid its file names is an iopath running in that host's namespace.
    let pid_file = |addr: &str| launch.file(&format!("iopath-agent-{addr}.pid"));
    let mut agents = Vec::new();
    for (addr, ns) in addrs.iter().zip(&launch.hosts.names) {
        let text = std::fs::read_to_string(pid_file(addr)).unwrap_or_else(|e| panic!("{addr}'s pid file: {e}"));
        let pid: i32 = text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{addr}'s pid file holds {text:?}"));
        assert!(is_running_iopath(pid), "{addr}: process {pid} is no running iopath");
        assert_eq!(
            netns_inode(&format!("/proc/{pid}/ns/net")),
            netns_inode(&format!("/run/netns/{ns}")),
            "{addr}: the agent runs in the host's namespace {ns}"
        );
        let log = launch.file(&format!("iopath-agent-{addr}.log"));
        assert!(
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("listening on"),
            "{}",
            log.display()
        );
        agents.push(pid);
    }
    let mut distinct = agents.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), HOSTS, "one agent per host: {agents:?}");

    // The recipe's stop line: pdsh kills each host's agent by its pid file, and removes it.
    let stop = launch.file("hosts");
    let out = common::finish_within(
        launch
            .recipe(&[Path::new("--stop"), &stop])
            .spawn()
            .expect("run the stop line"),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "pdsh.sh --stop: {}", common::stderr(&out));
    // An agent stops within its 20 ms polls; 30 s bounds a hang, not a time.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left = agents.clone();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|pid| !agent_gone(*pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(left.is_empty(), "agents still running after the stop line: {left:?}");
    for addr in &addrs {
        assert!(!pid_file(addr).exists(), "{addr}: the stop line removes the pid file");
    }

    // With the sshd gone too, nothing is left in the namespaces; then they go.
    launch.stop_sshd();
    let names = launch.hosts.all();
    for ns in &names {
        assert_eq!(pids_in(ns), Vec::<i32>::new(), "processes left in {ns}");
    }
    drop(launch);
    for ns in &names {
        assert!(!common::netns::listed(ns), "namespace {ns} left behind");
    }
}
