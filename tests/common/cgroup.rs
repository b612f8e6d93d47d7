//! A memory cgroup with a limit for one test, on cgroup v2 (`memory.max`) where its memory
//! controller can be used, else on v1 (`memory.limit_in_bytes`). Children are put in it before
//! they exec (`sh -c 'echo $$ > cgroup.procs; exec ...'`), so everything they allocate and
//! every page of the file cache they fill is charged to it. On drop the processes still in it
//! are killed and waited for and the folder is removed, on every exit path of the test
//! (including a failed assertion: drop runs while the panic unwinds).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

pub struct MemCgroup {
    pub dir: PathBuf,
    pub version: Version,
    pub limit: u64,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Where a cgroup v2 hierarchy with the memory controller available to children is mounted.
fn v2_root() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(PathBuf::from)
        .find(|root| {
            std::fs::read_to_string(root.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"))
        })
}

/// The cgroup v1 memory hierarchy, if mounted.
fn v1_root() -> Option<PathBuf> {
    let root = PathBuf::from("/sys/fs/cgroup/memory");
    root.join("memory.limit_in_bytes").exists().then_some(root)
}

impl MemCgroup {
    /// A new memory cgroup limited to `limit` bytes, or why none can be made here (not root,
    /// no memory controller in either hierarchy, a write refused).
    pub fn new(limit: u64) -> Result<MemCgroup, String> {
        let name = format!(
            "iopath-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut why = Vec::new();
        for (version, root) in [(Version::V2, v2_root()), (Version::V1, v1_root())] {
            let Some(root) = root else {
                why.push(format!("no cgroup {version:?} memory controller"));
                continue;
            };
            let dir = root.join(&name);
            if let Err(e) = std::fs::create_dir(&dir) {
                why.push(format!("cannot create {}: {e}", dir.display()));
                continue;
            }
            let cg = MemCgroup { dir, version, limit };
            let file = match version {
                Version::V2 => "memory.max",
                Version::V1 => "memory.limit_in_bytes",
            };
            match std::fs::write(cg.dir.join(file), limit.to_string()) {
                Ok(()) => {
                    if version == Version::V2 {
                        // No swap: the limit is the memory the processes may have.
                        let _ = std::fs::write(cg.dir.join("memory.swap.max"), "0");
                    }
                    return Ok(cg);
                }
                Err(e) => why.push(format!("cannot set {file} in {}: {e}", cg.dir.display())),
            }
            // `cg` drops here and removes the folder.
        }
        Err(format!("no memory cgroup can be made here: {}", why.join("; ")))
    }

    /// A command that joins this cgroup and then execs `program` with `args`.
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(self.dir.join("cgroup.procs"))
            .arg(program)
            .args(args);
        c
    }

    /// The processes in the cgroup now.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// How many times the kernel's OOM killer killed a process in this cgroup; None when the
    /// kernel does not say (v1 before 4.13).
    pub fn oom_kills(&self) -> Option<u64> {
        let file = match self.version {
            Version::V2 => "memory.events",
            Version::V1 => "memory.oom_control",
        };
        let text = std::fs::read_to_string(self.dir.join(file)).ok()?;
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("oom_kill")).then(|| w.next()?.parse().ok())?
        })
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // Kill what is left (a child the test did not reap), wait until the cgroup is empty
        // (a killed process leaves it when it is reaped or exits), then remove it.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = self.pids();
            if pids.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in pids {
                // Only pids read from this test's own cgroup.
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.dir.exists() {
            eprintln!("warning: could not remove the test cgroup {}", self.dir.display());
        }
    }
}
