//! The launch recipes in deploy/ (README "Many hosts"): every YAML manifest parses and carries
//! what the issue names — the DaemonSet on the host network with the key from a Secret at
//! /etc/iopath/psk, the capabilities and the agent's exact command line; the controller Job;
//! the Ansible playbook — and the shell scripts (Slurm, pdsh) pass `bash -n` and start the
//! agents in the background before the controller.

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
    let agent = AGENT.join(" ");
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
            .position(|l| l.contains("iopath fleet run rr --hosts") && l.contains("--pairs all"))
            .unwrap_or_else(|| panic!("{}: no fleet run over all pairs", path.display()));
        let started = lines
            .iter()
            .position(|l| l.contains("iopath net serve --agent --port"))
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
            assert!(lines[started].contains("pdsh -w"), "{}", lines[started]);
            assert!(lines[started].contains(&agent), "{}", lines[started]);
            assert!(lines[started].contains(" & "), "the agent is not put in the background");
        }
    }
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
