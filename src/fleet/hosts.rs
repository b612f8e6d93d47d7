//! The agents of a fleet run (`--hosts FILE`) and which directed pairs of them measure
//! (`--pairs all|ring|star:HOST|FILE`). Both files are read bounded and refused line by line:
//! every refusal names the file, the line and what is accepted.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// The most bytes a hosts or pairs file may hold: 10,000 agents at ~60 bytes a line, or the
/// pairs among a few hundred of them, with room for comments.
pub const MAX_LIST_FILE: u64 = 16 << 20;

/// The most agents one fleet run takes (the scale docs/methodology.md works out is 1,000).
pub const MAX_HOSTS: usize = 10_000;

/// `--hosts FILE`: one `HOST:PORT` per line; `#` starts a comment, blank lines are skipped.
pub fn read_hosts(path: &Path) -> Result<Vec<String>, String> {
    parse_hosts(&read_list(path, "--hosts")?, &path.display().to_string())
}

/// The agents named by `text` (the contents of the file `name`), in the file's order.
pub fn parse_hosts(text: &str, name: &str) -> Result<Vec<String>, String> {
    let mut hosts: Vec<String> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (number, line) in lines(text) {
        let mut words = line.split_whitespace();
        let (Some(host), None) = (words.next(), words.next()) else {
            return Err(format!(
                "--hosts {name} line {number}: '{}' is not one HOST:PORT (accepted: one agent per line, e.g. 10.0.0.2:7000; # comments)",
                crate::format::escape_control(line)
            ));
        };
        check_host_port(host).map_err(|why| format!("--hosts {name} line {number}: {why}"))?;
        if let Some(first) = seen.get(&agent_key(host)) {
            let same_text = hosts[*first].eq_ignore_ascii_case(host);
            let host = crate::format::escape_control(host);
            return Err(if same_text {
                format!("--hosts {name} line {number}: {host} is listed twice (each agent once)")
            } else {
                format!(
                    "--hosts {name} line {number}: {host} is the agent {} again (each agent once)",
                    crate::format::escape_control(&hosts[*first])
                )
            });
        }
        seen.insert(agent_key(host), hosts.len());
        hosts.push(host.to_string());
        if hosts.len() > MAX_HOSTS {
            return Err(format!(
                "--hosts {name}: more than {MAX_HOSTS} agents (accepted: 2 to {MAX_HOSTS})"
            ));
        }
    }
    if hosts.len() < 2 {
        return Err(format!(
            "--hosts {name}: {} agent(s); a fleet run needs at least 2 (one HOST:PORT per line)",
            hosts.len()
        ));
    }
    Ok(hosts)
}

/// What `host` connects to, as one spelling: the port as a number (`07000` is 7000), a numeric
/// IPv4 address as the resolver reads it (`127.000.000.002`, `0x7f.2`, `2130706434` are all
/// 127.0.0.2 — inet_aton's decimal, octal and hex parts), an IPv6 address in its shortest form
/// (an IPv4-mapped one as the IPv4 address it reaches), a name in lower case without the root's
/// trailing dot. Two entries with one key are one agent.
pub fn agent_key(host: &str) -> String {
    let Some((name, port)) = host.rsplit_once(':') else {
        return host.to_ascii_lowercase();
    };
    let port = port
        .parse::<u16>()
        .map(|p| p.to_string())
        .unwrap_or_else(|_| port.to_string());
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']'));
    let address = match bare.map(str::parse::<Ipv6Addr>) {
        Some(Ok(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
        _ => match numeric_ipv4(name) {
            Some(v4) => v4.to_string(),
            None => name.trim_end_matches('.').to_ascii_lowercase(),
        },
    };
    format!("{address}:{port}")
}

/// A numeric IPv4 address as inet_aton (and so getaddrinfo) reads it: one to four parts, each
/// decimal, octal (a leading 0) or hex (0x), the last filling the remaining bytes.
fn numeric_ipv4(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let number = |part: &str| -> Option<u64> {
        let lower = part.to_ascii_lowercase();
        let value = if let Some(hex) = lower.strip_prefix("0x") {
            if hex.is_empty() {
                Some(0)
            } else {
                u64::from_str_radix(hex, 16).ok()
            }
        } else if lower.len() > 1 && lower.starts_with('0') {
            u64::from_str_radix(&lower[1..], 8).ok()
        } else {
            lower.parse::<u64>().ok()
        };
        value.filter(|_| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric()))
    };
    let values: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (head, last) = values.split_at(values.len() - 1);
    if head.iter().any(|v| *v > 255) || last[0] >= 1u64 << (8 * (4 - head.len())) {
        return None;
    }
    let mut address = last[0];
    for (i, v) in head.iter().enumerate() {
        address |= v << (8 * (3 - i));
    }
    u32::try_from(address).ok().map(Ipv4Addr::from)
}

/// `HOST:PORT` with a port from 1 to 65535, no control characters, no spaces.
fn check_host_port(host: &str) -> Result<(), String> {
    if host.chars().any(char::is_control) || !crate::case::is_host_port(host) || host.len() > 255 {
        return Err(format!(
            "'{}' is not HOST:PORT with a port from 1 to 65535 (e.g. 10.0.0.2:7000 or node7:7000)",
            crate::format::escape_control(host)
        ));
    }
    Ok(())
}

/// `--pairs`: which directed pairs measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairSpec {
    /// Every host to every other, both directions (the circle method's rounds).
    All,
    /// Host i to host i+1 (the last to the first), in the order of `--hosts`.
    Ring,
    /// HOST to every other host and every other host to HOST.
    Star(String),
    /// `SOURCE DESTINATION` per line, each a host of `--hosts`.
    File(PathBuf),
}

impl std::str::FromStr for PairSpec {
    type Err = String;
    fn from_str(text: &str) -> Result<PairSpec, String> {
        let t = text.trim();
        Ok(match t {
            "all" => PairSpec::All,
            "ring" => PairSpec::Ring,
            "" => return Err("empty (accepted: all, ring, star:HOST:PORT, or a file of pairs)".into()),
            _ => match t.strip_prefix("star:") {
                Some(host) => {
                    check_host_port(host)?;
                    PairSpec::Star(host.to_string())
                }
                None => PairSpec::File(PathBuf::from(t)),
            },
        })
    }
}

impl std::fmt::Display for PairSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairSpec::All => f.write_str("all"),
            PairSpec::Ring => f.write_str("ring"),
            PairSpec::Star(h) => write!(f, "star:{h}"),
            PairSpec::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A directed pair: indexes into the host list, source (the client) first.
pub type Pair = (usize, usize);

/// The directed pairs of `spec` among `hosts`, for the schedules that are not `all` (which
/// [`super::schedule::circle`] builds as rounds directly). Errors name what is wrong.
pub fn pairs_of(spec: &PairSpec, hosts: &[String]) -> Result<Vec<Pair>, String> {
    let n = hosts.len();
    let index = |host: &str| hosts.iter().position(|h| agent_key(h) == agent_key(host));
    match spec {
        PairSpec::All => Ok((0..n)
            .flat_map(|a| (0..n).filter(move |b| *b != a).map(move |b| (a, b)))
            .collect()),
        PairSpec::Ring => Ok((0..n).map(|i| (i, (i + 1) % n)).filter(|(a, b)| a != b).collect()),
        PairSpec::Star(center) => {
            let c = index(center).ok_or_else(|| format!("star:{center} is not one of the --hosts"))?;
            Ok((0..n).filter(|i| *i != c).flat_map(|i| [(c, i), (i, c)]).collect())
        }
        PairSpec::File(path) => {
            let text = read_list(path, "--pairs")?;
            parse_pairs(&text, &path.display().to_string(), hosts)
        }
    }
}

/// A pairs file: `SOURCE DESTINATION` per line (hosts of `--hosts`), `#` comments.
pub fn parse_pairs(text: &str, name: &str, hosts: &[String]) -> Result<Vec<Pair>, String> {
    let index = |host: &str| hosts.iter().position(|h| agent_key(h) == agent_key(host));
    let mut pairs = Vec::new();
    let mut seen = HashSet::new();
    for (number, line) in lines(text) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [a, b] = words[..] else {
            return Err(format!(
                "--pairs {name} line {number}: '{}' is not two hosts (accepted: SOURCE DESTINATION, each a HOST:PORT of --hosts)",
                crate::format::escape_control(line)
            ));
        };
        let find = |h: &str| {
            index(h).ok_or_else(|| {
                format!(
                    "--pairs {name} line {number}: {} is not one of the --hosts",
                    crate::format::escape_control(h)
                )
            })
        };
        let pair = (find(a)?, find(b)?);
        if pair.0 == pair.1 {
            return Err(format!(
                "--pairs {name} line {number}: {a} to itself (a pair is two different hosts)"
            ));
        }
        if !seen.insert(pair) {
            return Err(format!(
                "--pairs {name} line {number}: {a} {b} is listed twice (each directed pair once)"
            ));
        }
        pairs.push(pair);
    }
    if pairs.is_empty() {
        return Err(format!("--pairs {name}: no pairs (one SOURCE DESTINATION per line)"));
    }
    Ok(pairs)
}

/// The lines of a list file worth reading: numbered from 1, comments and blanks dropped.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.split('#').next().unwrap_or("").trim();
        (!line.is_empty()).then_some((i + 1, line))
    })
}

/// A list file's text, bounded; `flag` names it in refusals.
fn read_list(path: &Path, flag: &str) -> Result<String, String> {
    let bytes =
        crate::sys::input::read_bounded(path, MAX_LIST_FILE).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{flag} {}: not UTF-8 text", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_with_comments_and_refused_by_line() {
        let hosts = parse_hosts(
            "# rack 1\n10.0.0.1:7000\n\n  10.0.0.2:7000  # the slow one\nnode3:7000\n",
            "h",
        )
        .unwrap();
        assert_eq!(hosts, ["10.0.0.1:7000", "10.0.0.2:7000", "node3:7000"]);
        let err = parse_hosts("10.0.0.1:7000\n10.0.0.2\n", "h").unwrap_err();
        assert!(
            err.starts_with("--hosts h line 2: '10.0.0.2' is not HOST:PORT"),
            "{err}"
        );
        let err = parse_hosts("a:1\n# x\nb:2\nA:1\n", "h").unwrap_err();
        assert_eq!(err, "--hosts h line 4: A:1 is listed twice (each agent once)");
        let err = parse_hosts("a:1 b:2\n", "h").unwrap_err();
        assert!(err.contains("line 1") && err.contains("not one HOST:PORT"), "{err}");
        assert!(parse_hosts("a:0\nb:1\n", "h").unwrap_err().contains("line 1"));
        assert!(parse_hosts("a:1\n", "h").unwrap_err().contains("at least 2"));
    }

    #[test]
    fn one_agent_spelt_two_ways_is_listed_twice() {
        for (a, b) in [
            ("10.1.2.3:7100", "10.001.002.003:7100"),
            ("10.1.2.3:7100", "10.1.2.3:07100"),
            ("10.1.2.3:7100", "0xa.1.2.3:7100"),
            ("10.1.2.3:7100", "167838211:7100"),
            ("10.1.2.3:7100", "10.1.515:7100"),
            ("10.1.2.8:7100", "10.1.2.010:7100"),
            ("10.1.2.3:7100", "[::ffff:10.1.2.3]:7100"),
            ("[fd00::5]:7100", "[fd00:0:0::0005]:7100"),
            ("Node4.lab:7100", "node4.LAB.:7100"),
        ] {
            let err = parse_hosts(&format!("{a}\n{b}\n"), "h").unwrap_err();
            assert!(err.contains("line 2") && err.contains("again"), "{a} {b}: {err}");
        }
        for (a, b) in [
            ("10.1.2.3:7100", "10.1.2.3:7101"),
            ("10.1.2.3:7100", "10.1.2.30:7100"),
            ("10.1.2.9:7100", "10.1.2.010:7100"),
            ("10.1.2.3:7100", "10.1.2.3.4:7100"),
            ("node4:7100", "node40:7100"),
        ] {
            assert!(parse_hosts(&format!("{a}\n{b}\n"), "h").is_ok(), "{a} {b}");
        }
        let hosts: Vec<String> = ["10.0.0.1:1", "10.0.0.2:1"].map(String::from).to_vec();
        assert_eq!(
            parse_pairs("10.0.0.001:1 10.0.0.2:01\n", "p", &hosts).unwrap(),
            vec![(0, 1)]
        );
    }

    #[test]
    fn pair_specs_parse_and_name_their_hosts() {
        let hosts: Vec<String> = ["a:1", "b:1", "c:1"].map(String::from).to_vec();
        assert_eq!("all".parse(), Ok(PairSpec::All));
        assert_eq!(pairs_of(&PairSpec::All, &hosts).unwrap().len(), 6);
        assert_eq!(pairs_of(&PairSpec::Ring, &hosts).unwrap(), vec![(0, 1), (1, 2), (2, 0)]);
        let star: PairSpec = "star:b:1".parse().unwrap();
        assert_eq!(pairs_of(&star, &hosts).unwrap(), vec![(1, 0), (0, 1), (1, 2), (2, 1)]);
        let far: PairSpec = "star:z:1".parse().unwrap();
        assert!(pairs_of(&far, &hosts).unwrap_err().contains("not one of the --hosts"));
        assert!("star:nope".parse::<PairSpec>().is_err());
        assert_eq!(
            parse_pairs("a:1 c:1\n# x\nc:1 a:1\n", "p", &hosts).unwrap(),
            vec![(0, 2), (2, 0)]
        );
        for (text, says) in [
            ("a:1\n", "line 1: 'a:1' is not two hosts"),
            ("a:1 b:1\nb:1 d:1\n", "line 2: d:1 is not one of the --hosts"),
            ("a:1 a:1\n", "line 1: a:1 to itself"),
            ("a:1 b:1\n\na:1 b:1\n", "line 3: a:1 b:1 is listed twice"),
            ("# none\n", "no pairs"),
        ] {
            let err = parse_pairs(text, "p", &hosts).unwrap_err();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }
}
