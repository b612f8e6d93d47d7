//! System settings an A/B run (`iopath ab`) switches between its variants, and a topology's
//! device options apply (`veth:gso_max_size=…`): a sysctl, a network device's offload (gro, gso,
//! tso) or a size limit (gso/gro_max_size and their IPv4 variants, over rtnetlink), a device's
//! root qdisc. Each is read and
//! applied in the calling thread's network namespace, so the same code sets the host (between
//! cells, journaled by the caller) or iopath's own namespaces (when a topology is built:
//! [`set_scoped`], applied by `Topology::establish`, gone with the namespace).

use super::topology::{iproute, iproute_output};
use crate::sys::ethtool::{self, Offload};
use crate::sys::rtnetlink::{self, LinkSize};
use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

/// One setting and the value it sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Setting {
    /// A file under /proc/sys, by its dotted name.
    Sysctl { name: String, value: String },
    /// An offload of a device, on or off.
    Offload { device: String, offload: String, on: bool },
    /// A size limit of a device: `limit` is `gso_max_size`, `gro_max_size`,
    /// `gso_ipv4_max_size` or `gro_ipv4_max_size` (set over rtnetlink: iproute2 before 6.3
    /// lacks the IPv4 keywords). Stored before the IPv4 variants as `gso_max_size` rows.
    #[serde(alias = "gso_max_size")]
    MaxSize {
        device: String,
        #[serde(default = "gso_limit")]
        limit: String,
        bytes: u64,
    },
    /// A device's root qdisc: `tc qdisc replace dev X root SPEC`, or `default` (the kernel's own).
    Qdisc { device: String, spec: String },
}

/// The device words of a setting inside a topology: the server's end, the client's end.
pub const TOPOLOGY_DEVICES: [&str; 2] = ["server", "client"];

/// What `--set` accepts, for the refusal.
pub const ACCEPTED: &str = "sysctl:NAME=VALUE, dev:DEV:gro|gso|tso=on|off, \
dev:DEV:gso_max_size|gro_max_size|gso_ipv4_max_size|gro_ipv4_max_size=BYTES, \
qdisc:DEV:SPEC (tc words, or default), flag:--FLAG=VALUE";

fn gso_limit() -> String {
    LinkSize::GsoMax.name().into()
}

/// The kernel's bound of every gso and gro size (GSO_MAX_SIZE and GRO_MAX_SIZE, 8 × 65535).
pub const MAX_PACKET_SIZE: u64 = 8 * 65535;

/// The size limits a device option may set (tso_max_size is the device's own).
pub const SIZE_LIMITS: [LinkSize; 4] = [
    LinkSize::GsoMax,
    LinkSize::GroMax,
    LinkSize::GsoIpv4Max,
    LinkSize::GroIpv4Max,
];

/// Whether `bytes` of `limit` fits a device whose tso_max_size is `tso_max`: the kernel takes
/// no gso size above it, and no gro size above GRO_MAX_SIZE.
pub fn check_size_fits(limit: LinkSize, bytes: u64, tso_max: u32, device: &str) -> Result<(), String> {
    let gso = matches!(limit, LinkSize::GsoMax | LinkSize::GsoIpv4Max);
    if gso && bytes > tso_max as u64 {
        return Err(format!(
            "{}={bytes} is above the tso_max_size of {device} ({tso_max}): the kernel builds no GSO packet larger than its device takes",
            limit.name()
        ));
    }
    if bytes > MAX_PACKET_SIZE {
        return Err(format!(
            "{}={bytes} is above the kernel's largest packet ({MAX_PACKET_SIZE}, GSO/GRO_MAX_SIZE)",
            limit.name()
        ));
    }
    Ok(())
}

fn offload_of(name: &str) -> Option<Offload> {
    match name {
        "gro" => Some(Offload::Gro),
        "gso" => Some(Offload::Gso),
        "tso" => Some(Offload::Tso),
        _ => None,
    }
}

impl FromStr for Setting {
    type Err = String;
    fn from_str(text: &str) -> Result<Setting, String> {
        let bad = |why: &str| format!("--set '{text}': {why} (accepted: {ACCEPTED})");
        let Some((kind, rest)) = text.split_once(':') else {
            return Err(bad("no KIND: before the setting"));
        };
        match kind {
            "sysctl" => {
                let (name, value) = rest.split_once('=').ok_or_else(|| bad("a sysctl needs NAME=VALUE"))?;
                let valid = !name.is_empty()
                    && name.split('.').all(|p| {
                        !p.is_empty() && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
                    });
                if !valid || value.trim().is_empty() {
                    return Err(bad(
                        "a sysctl is a dotted name and a value, e.g. net.ipv4.tcp_autocorking=0",
                    ));
                }
                Ok(Setting::Sysctl {
                    name: name.to_string(),
                    value: value.trim().to_string(),
                })
            }
            "dev" => {
                let (device, assignment) = rest
                    .split_once(':')
                    .ok_or_else(|| bad("a device setting is dev:DEV:NAME=VALUE"))?;
                check_device_name(device).map_err(|e| bad(&e))?;
                let (name, value) = assignment
                    .split_once('=')
                    .ok_or_else(|| bad("a device setting needs NAME=VALUE"))?;
                if let Some(size) = crate::case::size_limit_of(name, value) {
                    let (limit, bytes) = size.map_err(|e| bad(&e))?;
                    return Ok(Setting::MaxSize {
                        device: device.to_string(),
                        limit: limit.name().into(),
                        bytes,
                    });
                }
                if offload_of(name).is_none() {
                    return Err(bad(&format!(
                        "unknown device setting '{name}' (gro, gso, tso, gso_max_size, gro_max_size, gso_ipv4_max_size, gro_ipv4_max_size)"
                    )));
                }
                let on = match value {
                    "on" | "1" => true,
                    "off" | "0" => false,
                    _ => return Err(bad("an offload is on or off")),
                };
                Ok(Setting::Offload {
                    device: device.to_string(),
                    offload: name.to_string(),
                    on,
                })
            }
            "qdisc" => {
                let (device, spec) = rest.split_once(':').ok_or_else(|| bad("a qdisc is qdisc:DEV:SPEC"))?;
                check_device_name(device).map_err(|e| bad(&e))?;
                let spec = spec.split_whitespace().collect::<Vec<_>>().join(" ");
                if spec.is_empty() || spec.contains(['\'', '"', ';', '|', '&']) {
                    return Err(bad(
                        "a qdisc is tc's words after `root`, e.g. 'tbf rate 5mbit burst 32kbit latency 50ms'",
                    ));
                }
                Ok(Setting::Qdisc {
                    device: device.to_string(),
                    spec,
                })
            }
            _ => Err(bad(&format!("unknown setting kind '{kind}'"))),
        }
    }
}

fn check_device_name(device: &str) -> Result<(), String> {
    if device.is_empty()
        || device.len() >= 16
        || !device.chars().all(|c| c.is_ascii_alphanumeric() || "_-.@".contains(c))
    {
        return Err(format!("'{device}' is not a device name"));
    }
    Ok(())
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Sysctl { name, value } => write!(f, "sysctl:{name}={value}"),
            Setting::Offload { device, offload, on } => {
                write!(f, "dev:{device}:{offload}={}", if *on { "on" } else { "off" })
            }
            Setting::MaxSize { device, limit, bytes } => write!(f, "dev:{device}:{limit}={bytes}"),
            Setting::Qdisc { device, spec } => write!(f, "qdisc:{device}:{spec}"),
        }
    }
}

impl Setting {
    /// The device it names, if any.
    pub fn device(&self) -> Option<&str> {
        match self {
            Setting::Sysctl { .. } => None,
            Setting::Offload { device, .. } | Setting::MaxSize { device, .. } | Setting::Qdisc { device, .. } => {
                Some(device)
            }
        }
    }

    /// The same setting on another device (a topology's word made its real name).
    pub fn on_device(&self, name: &str) -> Setting {
        let mut s = self.clone();
        match &mut s {
            Setting::Sysctl { .. } => {}
            Setting::Offload { device, .. } | Setting::MaxSize { device, .. } | Setting::Qdisc { device, .. } => {
                *device = name.to_string()
            }
        }
        s
    }

    /// What it changes, without the value (two settings of one target cannot both be asked).
    pub fn target(&self) -> String {
        match self {
            Setting::Sysctl { name, .. } => format!("sysctl {name}"),
            Setting::Offload { device, offload, .. } => format!("{offload} of {device}"),
            Setting::MaxSize { device, limit, .. } => format!("{limit} of {device}"),
            Setting::Qdisc { device, .. } => format!("the root qdisc of {device}"),
        }
    }

    fn sysctl_path(name: &str) -> String {
        format!("/proc/sys/{}", name.replace('.', "/"))
    }

    /// Whether it can be set here (the calling thread's namespace): the sysctl exists, the
    /// device exists. One line for the user when not.
    pub fn check_here(&self) -> Result<(), String> {
        if let Setting::Sysctl { name, .. } = self {
            if !std::path::Path::new(&Setting::sysctl_path(name)).is_file() {
                return Err(format!(
                    "--set {self}: no sysctl {name} on this kernel (no {})",
                    Setting::sysctl_path(name)
                ));
            }
        }
        if let Some(device) = self.device() {
            if !ethtool::device_exists(device) {
                return Err(format!(
                    "--set {self}: no network device {device} here (`ip link` lists them)"
                ));
            }
        }
        if let Setting::MaxSize { device, bytes, .. } = self {
            let tso_max = rtnetlink::link_size(device, LinkSize::TsoMax)
                .map_err(|e| format!("--set {self}: cannot read the tso_max_size of {device}: {e}"))?;
            check_size_fits(self.size_limit()?, *bytes, tso_max, device).map_err(|e| format!("--set {self}: {e}"))?;
        }
        Ok(())
    }

    /// The limit a `MaxSize` names (an unknown name is a damaged stored setting).
    fn size_limit(&self) -> Result<LinkSize, String> {
        match self {
            Setting::MaxSize { limit, .. } => LinkSize::named(limit)
                .filter(|l| SIZE_LIMITS.contains(l))
                .ok_or_else(|| format!("{self}: {limit} is not a size limit of a device")),
            _ => Err(format!("{self} is not a size limit")),
        }
    }

    /// The value its target has now, as the setting that would put it back.
    pub fn current(&self) -> anyhow::Result<Setting> {
        Ok(match self {
            Setting::Sysctl { name, .. } => {
                let path = Setting::sysctl_path(name);
                let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
                Setting::Sysctl {
                    name: name.clone(),
                    value: text.split_whitespace().collect::<Vec<_>>().join(" "),
                }
            }
            Setting::Offload { device, offload, .. } => {
                let which = offload_of(offload).ok_or_else(|| anyhow!("unknown offload {offload}"))?;
                Setting::Offload {
                    device: device.clone(),
                    offload: offload.clone(),
                    on: ethtool::offload(device, which)
                        .with_context(|| format!("cannot read {} of {device}", offload))?,
                }
            }
            Setting::MaxSize { device, limit, .. } => {
                let which = self.size_limit().map_err(|e| anyhow!(e))?;
                let bytes =
                    rtnetlink::link_size(device, which).with_context(|| format!("cannot read {limit} of {device}"))?;
                Setting::MaxSize {
                    device: device.clone(),
                    limit: limit.clone(),
                    bytes: bytes as u64,
                }
            }
            Setting::Qdisc { device, .. } => {
                let text = iproute_output(
                    "tc",
                    &[
                        "qdisc".into(),
                        "show".into(),
                        "dev".into(),
                        device.clone(),
                        "root".into(),
                    ],
                )?;
                Setting::Qdisc {
                    device: device.clone(),
                    spec: root_qdisc_spec(&text),
                }
            }
        })
    }

    /// Set it in the calling thread's namespace.
    pub fn apply(&self) -> anyhow::Result<()> {
        match self {
            Setting::Sysctl { name, value } => {
                let path = Setting::sysctl_path(name);
                std::fs::write(&path, value).with_context(|| format!("cannot write {value} to {path}"))
            }
            Setting::Offload { device, offload, on } => {
                let which = offload_of(offload).ok_or_else(|| anyhow!("unknown offload {offload}"))?;
                ethtool::set_offload(device, which, *on).with_context(|| format!("cannot set {offload} of {device}"))
            }
            Setting::MaxSize { device, limit, bytes } => {
                let which = self.size_limit().map_err(|e| anyhow!(e))?;
                let bytes = u32::try_from(*bytes).map_err(|_| anyhow!("{limit} {bytes} is out of range"))?;
                rtnetlink::set_link_size(device, which, bytes)
                    .with_context(|| format!("cannot set {limit} of {device} to {bytes}"))
            }
            Setting::Qdisc { device, spec } if spec == "default" => {
                if self.current()? == *self {
                    return Ok(());
                }
                iproute("tc", &["qdisc", "del", "dev", device, "root"].map(String::from))
            }
            Setting::Qdisc { device, spec } => {
                let mut args: Vec<String> = ["qdisc", "replace", "dev", device, "root"].map(String::from).to_vec();
                args.extend(spec.split_whitespace().map(String::from));
                iproute("tc", &args)
            }
        }
    }
}

/// The root qdisc of `tc qdisc show dev X root` as `tc qdisc replace` words: `default` for the
/// kernel's own (handle 0:, or nothing shown), else its kind and parameters (`refcnt` dropped).
fn root_qdisc_spec(text: &str) -> String {
    let Some(line) = text.lines().find(|l| l.starts_with("qdisc ")) else {
        return "default".into();
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.get(2) == Some(&"0:") || words.len() < 3 {
        return "default".into();
    }
    let mut spec = vec![words[1]];
    let mut rest = words[3..].iter();
    while let Some(w) = rest.next() {
        match *w {
            "root" => {}
            "refcnt" => {
                rest.next();
            }
            other => spec.push(other),
        }
    }
    spec.join(" ")
}

/// The settings `Topology::establish` applies to the namespaces it builds (an A/B run's
/// variant B); empty for every other run and for variant A.
static SCOPED: Mutex<Vec<Setting>> = Mutex::new(Vec::new());

/// Make every topology built from now on get `settings` (devices named by
/// [`TOPOLOGY_DEVICES`]); an empty list for none.
pub fn set_scoped(settings: Vec<Setting>) {
    *SCOPED.lock().unwrap_or_else(|p| p.into_inner()) = settings;
}

/// The settings a topology built now gets.
pub fn scoped() -> Vec<Setting> {
    SCOPED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Refuse a setting of a topology that names a device other than its server's and client's end.
pub fn check_scoped(setting: &Setting) -> Result<(), String> {
    match setting.device() {
        Some(d) if !TOPOLOGY_DEVICES.contains(&d) => Err(format!(
            "--set {setting}: inside --topology netns|veth a device is `server` (the server's end) or `client` (the client's end), not {d}; add --host-settings to change a device of this host"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_print_back() {
        for text in [
            "sysctl:net.ipv4.tcp_autocorking=0",
            "dev:lo:gro=off",
            "dev:server:gso_max_size=16384",
            "dev:client:gro_ipv4_max_size=185000",
            "qdisc:client:tbf rate 5mbit burst 32kbit latency 50ms",
        ] {
            let s: Setting = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
        }
        for bad in [
            "gro=off",
            "nope:x=1",
            "sysctl:../etc=1",
            "dev:lo:lro=on",
            "dev:lo:gro=maybe",
            "dev:lo:gso_max_size=0",
            "dev:lo:gro_max_size=20M",
            "qdisc:lo:tbf; rm",
            "dev:lo:gso_max_size=17M",
            "dev:lo:gso_max_size=16Q",
        ] {
            let e = bad.parse::<Setting>().unwrap_err();
            assert!(e.starts_with(&format!("--set '{bad}'")), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn gso_max_size_reads_the_size_units_every_flag_reads() {
        for (text, bytes) in [
            ("16384", 16384),
            ("16K", 16 << 10),
            ("16KiB", 16 << 10),
            ("512k", 512 << 10),
        ] {
            let s: Setting = format!("dev:lo:gso_max_size={text}").parse().unwrap();
            assert!(matches!(s, Setting::MaxSize { bytes: b, .. } if b == bytes), "{text}");
        }
    }

    #[test]
    fn the_root_qdisc_is_read_as_words_to_put_back() {
        assert_eq!(root_qdisc_spec("qdisc noqueue 0: root refcnt 2 \n"), "default");
        assert_eq!(root_qdisc_spec(""), "default");
        assert_eq!(
            root_qdisc_spec("qdisc tbf 8001: root refcnt 2 rate 5Mbit burst 32Kb lat 50ms \n"),
            "tbf rate 5Mbit burst 32Kb lat 50ms"
        );
    }

    #[test]
    fn a_gso_max_size_stored_before_the_ipv4_variants_reads_back() {
        let old: Setting = serde_json::from_str(r#"{"kind":"gso_max_size","device":"lo","bytes":65536}"#).unwrap();
        assert_eq!(old.to_string(), "dev:lo:gso_max_size=65536");
        let new: Setting = "dev:lo:gro_ipv4_max_size=185000".parse().unwrap();
        let back: Setting = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back, new);
        assert!(check_size_fits(LinkSize::GsoMax, 185000, 65536, "x")
            .unwrap_err()
            .contains("tso_max_size of x (65536)"));
        assert!(check_size_fits(LinkSize::GroMax, 185000, 65536, "x").is_ok());
    }

    #[test]
    fn a_sysctl_that_does_not_exist_is_refused() {
        let s: Setting = "sysctl:net.ipv4.no_such_thing=1".parse().unwrap();
        assert!(s.check_here().unwrap_err().contains("no sysctl"));
        let d: Setting = "dev:iopathnone0:gro=off".parse().unwrap();
        assert!(d.check_here().unwrap_err().contains("no network device"));
    }
}
