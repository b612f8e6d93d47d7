//! Remote file reads over a real file server (`iopath micro fs --remote`): an SSH file server
//! (Debian's `sshd` and `sftp-server`) in a private network namespace behind a veth pair
//! (`Topology::establish`, optionally shaped with `rate=`), mounted with `sshfs` (FUSE,
//! `direct_io`: no page cache on the client side) by a client in a second private network
//! namespace, so no address is ever added to the root namespace. The same files are read
//! locally (O_DIRECT, on the server's own file system) and through the mount, block by block,
//! with the page cache dropped on both sides before every pass (the server is this kernel, so
//! POSIX_FADV_DONTNEED on the exported file drops the server's cache); the penalty is remote −
//! local, pass by pass.
//!
//! Nothing outlives the case, on any exit path:
//! - sshd and sshfs each run as PID 1 of a PID namespace of their own (`unshare --pid --fork
//!   --kill-child`); when that process dies the kernel kills everything in the namespace (sshd's
//!   per-connection children, sftp-server, sshfs's ssh);
//! - the `unshare` processes are iopath's children, tethered (`sys::tether`: own process group,
//!   SIGKILL when the thread that started them ends, which covers SIGKILL of iopath), killed by
//!   a forced exit's action (Ctrl-C twice) and killed and reaped when the case returns;
//! - the mount is made inside a private mount namespace (`unshare --mount`, propagation
//!   private) that only sshfs's PID namespace uses, so it never appears in the root
//!   namespace's /proc/mounts and disappears with sshfs; iopath reaches it through
//!   `/proc/<pid>/root`;
//! - the network namespaces are held by file descriptors (they die with iopath), and the
//!   scratch directory (keys, configuration, exported files) is removed on return.

use super::fs;
use super::harness::{self, push_summary, push_value, Budget};
use super::scratch::{self, ScratchDir};
use crate::case::MicroCase;
use crate::net::topology::{Link, Net, Topology};
use crate::observation::names;
use crate::observation::{Observation, Source, WarningKind};
use crate::stop::Stop;
use crate::sys::mem::{AnonMap, HugePages};
use crate::sys::netns::{self, NetNs};
use crate::sys::signal::{self, ForcedExitGuard};
use crate::sys::{process, statfs, tether};
use anyhow::{anyhow, bail, Context};
use rand::{RngExt, SeedableRng};
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The only file server iopath builds (the value of the case's `remote` option).
pub const SERVER: &str = "sshfs";
/// The Debian packages the remote setup needs.
pub const PACKAGES: &str = "openssh-server openssh-sftp-server openssh-client sshfs";
const SSHD: &str = "/usr/sbin/sshd";
const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";
/// statfs f_type of a FUSE mount (linux/magic.h FUSE_SUPER_MAGIC).
const FUSE_MAGIC: u64 = 0x6573_5546;
/// How long the server may take to listen, and the mount to appear.
const START_LIMIT: Duration = Duration::from_secs(15);
/// The default block size of `--remote`.
pub const DEFAULT_BLOCK: u64 = 4096;
/// The contention preset of `--remote` (the seed's shape): 1..8 readers at once.
pub const SEED_READERS: [usize; 4] = [1, 2, 4, 8];

/// The programs the setup runs, with the package each comes from.
const PROGRAMS: [(&str, &str); 7] = [
    (SSHD, "openssh-server"),
    (SFTP_SERVER, "openssh-sftp-server"),
    ("ssh", "openssh-client"),
    ("ssh-keygen", "openssh-client"),
    ("sshfs", "sshfs"),
    ("nsenter", "util-linux"),
    ("unshare", "util-linux"),
];

fn find_program(name: &str) -> Option<PathBuf> {
    if name.starts_with('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// Whether this machine can build the remote setup; the error is one line for the user.
pub fn check() -> Result<(), String> {
    let missing: Vec<String> = PROGRAMS
        .iter()
        .filter(|(p, _)| find_program(p).is_none())
        .map(|(p, pkg)| format!("{p} ({pkg})"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "--remote needs {} which are not installed: apt-get install {PACKAGES}",
            missing.join(", ")
        ));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err("--remote mounts with sshfs (FUSE) and /dev/fuse is missing: load the fuse module (modprobe fuse) or give the container /dev/fuse".into());
    }
    if !netns::can_build_namespaces() {
        return Err(
            "--remote needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create the namespaces and mount the file system"
                .into(),
        );
    }
    Ok(())
}

/// A started program that is killed (its process group, and so its PID namespace) and reaped
/// when dropped, and by a forced exit while it lives.
struct Tethered {
    child: Child,
    log: PathBuf,
    _forced_exit: ForcedExitGuard,
}

impl Tethered {
    fn start(mut cmd: Command, log: PathBuf) -> anyhow::Result<Tethered> {
        let err = File::create(&log)?;
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err);
        tether::tether(&mut cmd);
        let child = cmd.spawn().with_context(|| format!("could not start {cmd:?}"))?;
        let pid = child.id() as libc::pid_t;
        let guard = signal::on_forced_exit(move || signal::kill_process_group(pid));
        Ok(Tethered {
            child,
            log,
            _forced_exit: guard,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Err with the program's last log lines when it has exited.
    fn alive(&mut self, what: &str) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{what} exited ({status}): {}", self.log_tail());
        }
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
        if tail.is_empty() {
            "no message".into()
        } else {
            tail
        }
    }
}

/// How long a teardown waits for `unshare` to end once its child was killed.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(3);

/// The children of `pid` (for `unshare --fork`: the first process of its PID namespace).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

impl Drop for Tethered {
    fn drop(&mut self) {
        // Kill the namespace's first process before `unshare`, so that `unshare` reaps it
        // (and the kernel has killed the rest of the namespace by then) and this process
        // reaps `unshare`: nothing is left, not even a zombie. `unshare` exits once its
        // child is gone; it is killed anyway after a bounded wait.
        for pid in children(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let start = Instant::now();
        while start.elapsed() < TEARDOWN_LIMIT && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(5));
        }
        signal::kill_process_group(self.child.id() as libc::pid_t);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the scratch folder's base `base` (absolute: `scratch::base_dir`) can be carried
/// where the setup names it: sshd's configuration (a line of words), sshfs's `-o` options
/// (split at commas) and the `host:path` it mounts. A path with whitespace, a comma, a quote,
/// a backslash or a control character cannot; the refusal says so instead of sshd's words.
pub fn check_base(base: &Path) -> Result<(), String> {
    let text = base
        .to_str()
        .ok_or_else(|| format!("'{}' is not UTF-8", base.display()))?;
    match text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, ',' | '"' | '\'' | '\\' | '#'))
    {
        Some(c) => Err(format!(
            "the folder '{}' holds {:?}, which sshd's configuration and sshfs's options cannot carry; give a folder \
             whose path has no space, comma, quote, backslash or '#'",
            crate::format::escape_control(text),
            c
        )),
        None => Ok(()),
    }
}

/// The running setup. Field order is teardown order: the client (and its mount) first, then
/// the server, the links, the client's namespace, and last the scratch directory.
pub struct Remote {
    _sshfs: Tethered,
    _sshd: Tethered,
    _net: Net,
    _client_ns: NetNs,
    /// The mount point as seen from this process (through sshfs's mount namespace).
    mount: PathBuf,
    export: PathBuf,
    link: Topology,
    _scratch: ScratchDir,
}

impl Remote {
    /// Build it: keys, server, links, mount. Everything built so far is torn down on error.
    pub fn start(base: &Path, link: Link, stop: Stop) -> anyhow::Result<Remote> {
        check().map_err(|e| anyhow!(e))?;
        check_base(base).map_err(|e| anyhow!(e))?;
        let scratch = ScratchDir::new(base)?;
        let dir = scratch.path().to_path_buf();
        let export = dir.join("export");
        let mnt = dir.join("mnt");
        let keys = dir.join("keys");
        for d in [&export, &mnt, &keys] {
            std::fs::create_dir(d)?;
        }
        for key in ["host_key", "user_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "iopath-throwaway", "-f"])
                .arg(keys.join(key))
                .stdin(Stdio::null())
                .output()
                .context("could not run ssh-keygen")?;
            if !out.status.success() {
                bail!("ssh-keygen failed: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
        }
        std::fs::copy(keys.join("user_key.pub"), keys.join("authorized_keys"))?;
        let client_ns = NetNs::new().context("could not create the client's network namespace")?;
        let topology = Topology::Veth(link);
        // Built from inside the client's namespace: the host end of the veth pair, and its
        // address, live there and not in the root namespace.
        let net = client_ns
            .run(|| topology.establish())
            .map_err(|e| anyhow!("could not enter the client's network namespace: {e}"))??;
        let addr = net.listen_addr(22)?;
        let config = keys.join("sshd_config");
        std::fs::write(&config, sshd_config(&keys, addr))?;
        let server_ns = net
            .server_namespace()
            .ok_or_else(|| anyhow!("the veth topology has no server namespace"))?;
        // sshd refuses to start without its privilege separation directory: it gets a tmpfs
        // /run of its own in a private mount namespace, so nothing is created on the host.
        let mut cmd = isolated(&server_ns.path());
        cmd.args([
            "sh",
            "-c",
            "mount -t tmpfs iopath-sshd /run && mkdir /run/sshd && exec \"$@\"",
            "sh",
        ])
        .args([SSHD, "-D", "-e", "-f"])
        .arg(&config);
        let mut sshd = Tethered::start(cmd, dir.join("sshd.log"))?;
        wait_listening(&client_ns, addr, &mut sshd, stop)?;
        let key = keys.join("user_key");
        let options = format!(
            "IdentityFile={},IdentitiesOnly=yes,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,LogLevel=ERROR,Port=22,direct_io,dir_cache=no,max_conns=1",
            key.display()
        );
        let mut cmd = isolated(&client_ns.path());
        cmd.args(["sshfs", "-f", "-F", "/dev/null", "-o", &options])
            .arg(format!("root@{}:{}", addr.ip(), export.display()))
            .arg(&mnt);
        let mut sshfs = Tethered::start(cmd, dir.join("sshfs.log"))?;
        let mount = PathBuf::from(format!("/proc/{}/root", sshfs.pid())).join(mnt.strip_prefix("/").unwrap_or(&mnt));
        wait_mounted(&mount, &mut sshfs, &mut sshd, stop)?;
        Ok(Remote {
            _sshfs: sshfs,
            _sshd: sshd,
            _net: net,
            _client_ns: client_ns,
            mount,
            export,
            link: topology,
            _scratch: scratch,
        })
    }

    /// A file's path through the mount.
    pub fn remote_path(&self, name: &str) -> PathBuf {
        self.mount.join(name)
    }

    /// The same file on the server's own file system.
    pub fn local_path(&self, name: &str) -> PathBuf {
        self.export.join(name)
    }

    /// What was measured, for the case's notes.
    pub fn describe(&self) -> String {
        format!(
            "remote: files read through sshfs (FUSE, direct_io: no client page cache) from sshd + sftp-server in a private network namespace, over a veth pair ({}; the client in a namespace of its own); local: the same files read on the server's file system; page caches dropped on both sides before every pass",
            self.link
        )
    }
}

fn sshd_config(keys: &Path, addr: SocketAddr) -> String {
    format!(
        "# iopath micro fs --remote: a throwaway server, removed with this directory\n\
         ListenAddress {ip}\nPort 22\nHostKey {host}\nAuthorizedKeysFile {auth}\n\
         PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         UsePAM no\nStrictModes no\nPidFile none\nUseDNS no\nPrintMotd no\n\
         Subsystem sftp {SFTP_SERVER}\n",
        ip = addr.ip(),
        host = keys.join("host_key").display(),
        auth = keys.join("authorized_keys").display(),
    )
}

fn wait_listening(client_ns: &NetNs, addr: SocketAddr, sshd: &mut Tethered, stop: Stop) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        harness::check(stop)?;
        sshd.alive("sshd")?;
        let connected = client_ns
            .run(|| TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())
            .unwrap_or(false);
        if connected {
            return Ok(());
        }
        if start.elapsed() > START_LIMIT {
            bail!(
                "sshd did not listen on {addr} within {}: {}",
                process::seconds(START_LIMIT),
                sshd.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_mounted(mount: &Path, sshfs: &mut Tethered, sshd: &mut Tethered, stop: Stop) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        harness::check(stop)?;
        sshfs.alive("sshfs")?;
        sshd.alive("sshd")?;
        if statfs::fs_magic(mount).is_ok_and(|m| m == FUSE_MAGIC) {
            return Ok(());
        }
        if start.elapsed() > START_LIMIT {
            bail!(
                "the sshfs mount did not appear within {}: sshfs: {}; sshd: {}",
                process::seconds(START_LIMIT),
                sshfs.log_tail(),
                sshd.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where a pass reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Local,
    Remote,
}

/// One case of `micro fs --remote`: variant seq_read, rand_read or contention.
pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let quick = harness::is_quick(case);
    let variant = case.option("variant").unwrap_or("seq_read");
    let link = match case.option("link") {
        None => Link::default(),
        Some(text) => match format!("veth:{text}").parse::<Topology>() {
            Ok(Topology::Veth(link)) => link,
            _ => bail!("fs --remote: link '{text}' is not accepted (accepted: mtu=N,rate=R)"),
        },
    };
    let block = harness::opt_u64(case, "block_bytes", DEFAULT_BLOCK)?;
    if block == 0 || block % 4096 != 0 {
        bail!("fs --remote: block size must be a multiple of 4KiB, got {block}");
    }
    let remote = Remote::start(&scratch::base_dir(case.option("dir")), link, stop)?;
    let mut obs = Observation::default();
    obs.warn(WarningKind::Substituted, remote.describe());
    match statfs::fs_type(&remote.mount) {
        Ok(fs) => push_value(&mut obs, "remote_fs_type_magic", "f_type", fs.magic as f64),
        Err(e) => bail!("statfs of the mount failed: {e}"),
    }
    match statfs::fs_type(&remote.export) {
        Ok(fs) => {
            push_value(&mut obs, "local_fs_type_magic", "f_type", fs.magic as f64);
            if let Some(note) = fs::filesystem_note(fs, false) {
                obs.warn(WarningKind::Substituted, format!("local: {note}"));
            }
        }
        Err(e) => bail!("statfs of the exported directory failed: {e}"),
    }
    push_value(&mut obs, "block_bytes", "B", block as f64);
    match variant {
        v @ ("seq_read" | "rand_read") => reads(case, quick, v == "rand_read", block, &remote, stop, &mut obs)?,
        "contention" => contention(case, quick, block, &remote, stop, &mut obs)?,
        other => {
            bail!("fs --remote: variant '{other}' is not measured remotely (accepted: seq_read, rand_read, contention)")
        }
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}

/// Open a file of the pass's side: O_DIRECT where the file system takes it.
fn open(remote: &Remote, side: Side, name: &str, obs: &mut Observation) -> anyhow::Result<File> {
    let path = match side {
        Side::Local => remote.local_path(name),
        Side::Remote => remote.remote_path(name),
    };
    let (file, direct) = fs::open_direct(&path).with_context(|| format!("could not open {}", path.display()))?;
    if !direct && side == Side::Local {
        obs.warn(
            WarningKind::Substituted,
            "local: the server's file system refuses O_DIRECT: buffered reads after POSIX_FADV_DONTNEED were timed instead",
        );
    }
    Ok(file)
}

/// Drop every cached page of these files: the server's (the exported files, on this kernel)
/// and the client's (the files through the mount).
fn drop_caches(files: &[&File]) -> anyhow::Result<()> {
    for f in files {
        fs::drop_cache(f)?;
    }
    Ok(())
}

fn reads(
    case: &MicroCase,
    quick: bool,
    random: bool,
    block: u64,
    remote: &Remote,
    stop: Stop,
    obs: &mut Observation,
) -> anyhow::Result<()> {
    let size = harness::opt_u64(case, "file_bytes", if quick { 1 << 20 } else { 16 << 20 })?;
    let size = size.div_ceil(block).max(1) * block;
    let samples = Budget::of(case).samples.min(if quick { 6 } else { 9 });
    fs::write_file(&remote.local_path("fs.dat"), size, stop)?;
    let local = open(remote, Side::Local, "fs.dat", obs)?;
    let far = open(remote, Side::Remote, "fs.dat", obs)?;
    let mut buf = AnonMap::new(block as usize, HugePages::Refuse)?;
    let blocks = size / block;
    // Every remote read is a round trip to the server: cap the reads of one pass.
    let reads = blocks.min(if quick { 256 } else { 2048 });
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let (mut local_us, mut remote_us, mut penalty_us) = (Vec::new(), Vec::new(), Vec::new());
    for sample in 0..samples {
        let offsets: Vec<u64> = (0..reads)
            .map(|i| {
                if random {
                    rng.random_range(0..blocks) * block
                } else {
                    i * block
                }
            })
            .collect();
        // Alternate which side goes first, so a drift in the machine's load hits both alike.
        let order = if sample % 2 == 0 {
            [Side::Local, Side::Remote]
        } else {
            [Side::Remote, Side::Local]
        };
        let mut per = [0.0f64; 2];
        for side in order {
            drop_caches(&[&local, &far])?;
            let file = if side == Side::Local { &local } else { &far };
            let t0 = harness::now();
            for off in &offsets {
                let n = file.read_at(&mut buf.as_mut_slice()[..block as usize], *off)?;
                if n as u64 != block {
                    bail!("fs --remote: short read of {n} bytes at offset {off}");
                }
                harness::check(stop)?;
            }
            let us = harness::interval_ns(t0, harness::now()) / 1000.0 / reads as f64;
            per[(side == Side::Remote) as usize] = us;
        }
        local_us.push(per[0]);
        remote_us.push(per[1]);
        penalty_us.push(per[1] - per[0]);
    }
    push_value(obs, "file_bytes", "B", size as f64);
    push_value(obs, "reads_per_pass", "count", reads as f64);
    push_read_times(obs, &local_us, &remote_us, &penalty_us);
    Ok(())
}

/// N files of the same size read at once by N processes, locally and remotely: per-block time.
fn contention(
    case: &MicroCase,
    quick: bool,
    block: u64,
    remote: &Remote,
    stop: Stop,
    obs: &mut Observation,
) -> anyhow::Result<()> {
    let procs = harness::opt_u64(case, "procs", 1)? as usize;
    if procs == 0 || procs > 64 {
        bail!("fs contention: procs must be 1..64, got {procs}");
    }
    let size = harness::opt_u64(case, "file_bytes", if quick { 256 << 10 } else { 1 << 20 })?;
    let size = size.div_ceil(block).max(1) * block;
    let rounds = Budget::of(case).samples.min(if quick { 6 } else { 7 });
    let names: Vec<String> = (0..procs).map(|i| format!("reader-{i}.dat")).collect();
    for name in &names {
        fs::write_file(&remote.local_path(name), size, stop)?;
    }
    let mut local = Vec::new();
    let mut far = Vec::new();
    for name in &names {
        local.push(open(remote, Side::Local, name, obs)?);
        far.push(open(remote, Side::Remote, name, obs)?);
    }
    let all: Vec<&File> = local.iter().chain(far.iter()).collect();
    let mut buf = AnonMap::new(block as usize, HugePages::Refuse)?;
    let (mut local_us, mut remote_us, mut penalty_us) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Side::Local, Side::Remote]
        } else {
            [Side::Remote, Side::Local]
        };
        let mut per = [0.0f64; 2];
        for side in order {
            drop_caches(&all)?;
            let files = if side == Side::Local { &local } else { &far };
            let times = read_at_once(files, buf.as_mut_slice(), block, stop)?;
            let mean = times.iter().sum::<f64>() / times.len() as f64;
            per[(side == Side::Remote) as usize] = mean;
            if side == Side::Local {
                local_us.extend(times);
            } else {
                remote_us.extend(times);
            }
        }
        penalty_us.push(per[1] - per[0]);
    }
    push_value(obs, "file_bytes", "B", size as f64);
    push_value(obs, "readers", "count", procs as f64);
    push_read_times(obs, &local_us, &remote_us, &penalty_us);
    Ok(())
}

/// The times per read locally and remotely and the remote's penalty (remote minus local), in
/// microseconds: the figures both benches measure.
fn push_read_times(obs: &mut Observation, local_us: &[f64], remote_us: &[f64], penalty_us: &[f64]) {
    push_summary(obs, names::LOCAL_TIME_PER_READ_US, "us", local_us, Source::Tool);
    push_summary(obs, names::REMOTE_TIME_PER_READ_US, "us", remote_us, Source::Tool);
    push_summary(obs, names::PENALTY_PER_READ_US, "us", penalty_us, Source::Tool);
}

/// Start one reader child per file, release them together, and return each one's time per
/// block in microseconds.
fn read_at_once(files: &[File], buf: &mut [u8], block: u64, stop: Stop) -> anyhow::Result<Vec<f64>> {
    let (go_r, go_w) = process::pipe()?;
    let (rep_r, rep_w) = process::pipe()?;
    let mut children = Vec::with_capacity(files.len());
    for f in files {
        children.push(process::fork_file_reader(
            f.as_raw_fd(),
            buf,
            go_r.as_raw_fd(),
            rep_w.as_raw_fd(),
        )?);
    }
    drop((go_r, rep_w));
    process::write_all_fd(&go_w, &vec![1u8; files.len()])?;
    let mut times = Vec::with_capacity(files.len());
    for _ in files {
        let mut raw = [0u8; 16];
        // Waits in Stop::POLL steps; on a stop the readers are killed as `children` drops.
        process::read_exact_fd(&rep_r, &mut raw, stop)?;
        let r = process::decode_reader_result(&raw);
        let blocks = (r.bytes / block).max(1);
        times.push(r.nanos as f64 / 1000.0 / blocks as f64);
    }
    for child in children {
        let status = child.wait(stop)?;
        if status != 0 {
            bail!("fs --remote contention: a reader exited with status {status}");
        }
    }
    Ok(times)
}

/// A command run inside the network namespace at `ns` as PID 1 of a PID and mount namespace of
/// its own (`unshare --kill-child`): it and everything it starts die together, and its mounts
/// are private to it.
fn isolated(ns: &str) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={ns}")).args([
        "--",
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount",
        "--propagation",
        "private",
        "--",
    ]);
    cmd
}
