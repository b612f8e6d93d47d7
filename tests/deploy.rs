//! The launch recipes in deploy/ (README "Many hosts"): every YAML manifest parses and carries
//! what the issue names — the DaemonSet on the host network with the key from a Secret at
//! /etc/iopath/psk, the capabilities and the agent's exact command line; the controller Job;
//! the Ansible playbook — and the shell scripts (Slurm, pdsh) pass `bash -n` and start the
//! agents in the background before the controller; the pdsh recipe is run with a stand-in
//! pdsh and iopath to check the commands it gives each host.

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The agent's command line, as every launcher must start it.
const AGENT: [&str; 8] = [
    "iopath",
    "net",
    "serve",
    "--agent",
    "--port",
    "7000",
    "--psk-file",
    "/etc/iopath/psk",
];

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn files(ends: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, ends: &[&str], out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, ends, out);
            } else if ends.iter().any(|e| path.to_string_lossy().ends_with(e)) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&deploy(), ends, &mut out);
    out.sort();
    out
}

/// Every document of a YAML file, as JSON values.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            let v = serde_norway::Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            serde_json::to_value(v).unwrap()
        })
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_else(|| panic!("not text: {s}")))
        .collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} among {docs:?}"))
}

/// The container's mount of the PSK: a Secret volume mounted read-only at /etc/iopath/psk.
fn psk_mounted_from_a_secret(pod: &Value, container: &Value) {
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/etc/iopath/psk")
        .unwrap_or_else(|| panic!("nothing mounted at /etc/iopath/psk: {container}"));
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let secret = volume["secret"]["secretName"]
        .as_str()
        .unwrap_or_else(|| panic!("not a Secret: {volume}"));
    assert!(!secret.is_empty());
    assert_eq!(
        mount["subPath"], "psk",
        "the Secret's key psk, as the file /etc/iopath/psk"
    );
}

#[test]
fn every_yaml_file_parses() {
    let yaml = files(&[".yaml", ".yml"]);
    assert!(yaml.len() >= 3, "{yaml:?}");
    for path in yaml {
        assert!(!documents(&path).is_empty(), "{}", path.display());
    }
}

#[test]
fn the_daemonset_runs_the_agent_on_the_host_network_with_the_key_and_capabilities() {
    let docs = documents(&deploy().join("kubernetes/iopath-agent-daemonset.yaml"));
    let ds = kind(&docs, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let agent = &containers[0];
    assert_eq!(strings(&agent["command"]), AGENT);
    let mut caps = strings(&agent["securityContext"]["capabilities"]["add"]);
    caps.sort_unstable();
    assert_eq!(caps, ["IPC_LOCK", "NET_ADMIN", "PERFMON", "SYS_NICE"]);
    psk_mounted_from_a_secret(pod, agent);
    // The selector selects the pods it makes.
    let labels = &ds["spec"]["template"]["metadata"]["labels"];
    for (k, v) in ds["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&labels[k], v);
    }
}

#[test]
fn the_controller_is_a_job_running_fleet_run_over_all_pairs() {
    let docs = documents(&deploy().join("kubernetes/iopath-fleet-job.yaml"));
    let job = kind(&docs, "Job");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let controller = &pod["containers"][0];
    let command = strings(&controller["command"]);
    assert_eq!(command[..4], ["iopath", "fleet", "run", "rr"]);
    let after = |flag: &str| command.iter().position(|a| *a == flag).map(|i| command[i + 1]);
    assert_eq!(after("--pairs"), Some("all"));
    assert_eq!(after("--psk-file"), Some("/etc/iopath/psk"));
    let hosts = after("--hosts").unwrap();
    assert!(
        controller["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| hosts.starts_with(m["mountPath"].as_str().unwrap())),
        "the hosts file {hosts} is on no mounted volume"
    );
    psk_mounted_from_a_secret(pod, controller);
    // The database is on the volume the claim in the same file provides.
    let db = after("--db").unwrap();
    let claim = kind(&docs, "PersistentVolumeClaim")["metadata"]["name"]
        .as_str()
        .unwrap();
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["persistentVolumeClaim"]["claimName"] == claim)
        .unwrap();
    assert!(controller["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == volume["name"] && db.starts_with(m["mountPath"].as_str().unwrap())));
}

#[test]
fn the_ansible_playbook_starts_the_agents_then_the_controller() {
    let plays = documents(&deploy().join("ssh/iopath-fleet.yml"));
    let plays = plays[0].as_array().expect("a playbook is a list of plays");
    assert_eq!(plays.len(), 2);
    let argvs = |play: &Value| -> Vec<Vec<String>> {
        play["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["ansible.builtin.command"]["argv"].as_array())
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .collect()
    };
    assert_eq!(plays[0]["hosts"], "iopath_agents");
    let start = argvs(&plays[0]);
    assert!(
        start.iter().any(|argv| argv.ends_with(&AGENT.map(String::from))),
        "no task starts the agent as {AGENT:?}: {start:?}"
    );
    let fleet = argvs(&plays[1]);
    let run = fleet
        .iter()
        .find(|a| a[..4] == ["iopath", "fleet", "run", "rr"])
        .expect("the controller's fleet run");
    assert!(run.windows(2).any(|w| w == ["--pairs", "all"]), "{run:?}");
    assert!(run.iter().any(|a| a == "--hosts"), "{run:?}");
}

#[test]
fn the_shell_recipes_pass_bash_n_and_start_the_agents_in_the_background_first() {
    let scripts = files(&[".sh", ".sbatch"]);
    assert_eq!(scripts.len(), 2, "{scripts:?}");
    for path in &scripts {
        let out = std::process::Command::new("bash").arg("-n").arg(path).output().unwrap();
        assert!(
            out.status.success(),
            "bash -n {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
        let fleet = lines
            .iter()
            .position(|l| l.contains("fleet run rr --hosts") && l.contains("--pairs all"))
            .unwrap_or_else(|| panic!("{}: no fleet run over all pairs", path.display()));
        let started = lines
            .iter()
            .position(|l| l.contains("net serve --agent --port"))
            .unwrap_or_else(|| panic!("{}: no agent started", path.display()));
        assert!(
            started < fleet,
            "{}: the agents start after the controller",
            path.display()
        );
        if path.extension().is_some_and(|e| e == "sbatch") {
            // srun, one agent per node, in the background (the line ends with `&`).
            let step = lines[..=started].join("\n");
            assert!(step.contains("srun") && step.contains("--ntasks-per-node=1"), "{step}");
            assert!(lines[started].trim_end().ends_with('&'), "{}", lines[started]);
            assert!(lines[started].contains("--psk-file"));
        } else {
            // pdsh.sh: what it runs is checked by running it (below).
            assert!(lines[started - 1].contains("pdsh -S -w"), "{}", lines[started - 1]);
            assert!(lines[started].contains(" & "), "the agent is not put in the background");
        }
    }
}

/// Whether `pid` is a process that has not exited (absent or a zombie: it has).
fn running(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or_default().trim_start().chars().next();
    state.is_some_and(|s| s != 'Z')
}

/// deploy/ssh/pdsh.sh run as written, with a `pdsh` that runs the remote command on each host
/// of its -w list here (with the SSH_CONNECTION ssh would give it) and an `iopath` that records
/// its command line (as an agent it says it listens and sleeps): the agent's exact command line
/// once per host on the port its line names, files named per host, the controller after them
/// with the extra flags, and the stop line ending every agent. tests/fleet_launcher.rs runs it
/// with the real pdsh over ssh.
#[test]
fn the_pdsh_recipe_starts_each_hosts_agent_then_the_controller_and_its_stop_line_ends_them() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let calls = dir.path().join("calls");
    let script = |name: &str, text: &str| {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    script(
        "pdsh",
        r#"#!/bin/bash
echo "pdsh $*" >> "$CALLS"
[ "$1" = -S ] && [ "$2" = -w ] || exit 9
list=$3; shift 3
status=0
for host in ${list//,/ }; do SSH_CONNECTION="192.0.2.9 50000 $host 22" bash -c "$*" || status=$?; done
exit $status
"#,
    );
    script(
        "iopath",
        r#"#!/bin/bash
echo "iopath $*" >> "$CALLS"
if [ "$2" = serve ]; then echo "iopath net serve: listening on 0.0.0.0:$5" >&2; exec sleep 30; fi
"#,
    );
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        "# three hosts\n10.0.0.1:7000\n  10.0.0.2:7000 # two\n\nnode3:7001\n",
    )
    .unwrap();
    let recipe = |args: &[&std::ffi::OsStr]| {
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        std::process::Command::new("bash")
            .arg(deploy().join("ssh/pdsh.sh"))
            .args(args)
            .env("PATH", path)
            .env("CALLS", &calls)
            .env("IOPATH_AGENT_DIR", dir.path())
            .env_remove("IOPATH")
            .env_remove("IOPATH_PSK")
            .output()
            .unwrap()
    };
    let out = recipe(&[hosts.as_os_str(), "x.db".as_ref(), "--duration".as_ref(), "1s".as_ref()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&calls).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let agent = |port: &str| AGENT.join(" ").replace("7000", port);
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[0].starts_with("pdsh -S -w 10.0.0.1,10.0.0.2 "), "{text}");
    assert_eq!(lines[1..3], [agent("7000"), agent("7000")], "{text}");
    assert!(lines[3].starts_with("pdsh -S -w node3 "), "{text}");
    assert_eq!(lines[4], agent("7001"), "{text}");
    assert_eq!(
        lines[5],
        format!(
            "iopath fleet run rr --hosts {} --pairs all --psk-file /etc/iopath/psk --db x.db --duration 1s",
            hosts.display()
        )
    );
    let mut pids = Vec::new();
    for host in ["10.0.0.1:7000", "10.0.0.2:7000", "node3:7001"] {
        let log = std::fs::read_to_string(dir.path().join(format!("iopath-agent-{host}.log"))).unwrap();
        assert!(log.contains("listening on"), "{host}: {log}");
        let pid = std::fs::read_to_string(dir.path().join(format!("iopath-agent-{host}.pid"))).unwrap();
        let pid: i32 = pid.trim().parse().unwrap();
        assert!(running(pid), "{host}'s agent {pid}");
        pids.push(pid);
    }

    let out = recipe(&["--stop".as_ref(), hosts.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|p| running(*p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!pids.iter().any(|p| running(*p)), "agents left: {pids:?}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pid"))
        .collect();
    assert!(left.is_empty(), "pid files left: {left:?}");

    // No hosts file: the usage, exit 2.
    let out = recipe(&["--stop".as_ref()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: pdsh.sh HOSTS"));
}

#[test]
fn the_readme_shows_the_three_ways_to_launch() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Many hosts"))
        .expect("a 'Many hosts' section");
    for needle in [
        "deploy/kubernetes/iopath-agent-daemonset.yaml",
        "deploy/slurm/iopath-fleet.sbatch",
        "deploy/ssh/pdsh.sh",
        "deploy/ssh/iopath-fleet.yml",
        &AGENT.join(" "),
        "iopath fleet run rr --hosts",
    ] {
        assert!(section.contains(needle), "README's Many hosts section lacks {needle}");
    }
}
