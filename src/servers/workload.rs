//! What the clients ask for: `echo:<bytes>` or `procs:<k>`.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Echo a payload of this many bytes.
    Echo(usize),
    /// The top-k CPU consumers.
    Procs(u16),
}

const HELP: &str = "accepted: echo:<bytes> (e.g. echo:64, echo:4K, up to 1MiB) or procs:<k> (e.g. procs:2, k 1..1000)";

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, arg) = s.trim().split_once(':').unwrap_or((s.trim(), ""));
        match kind {
            "echo" => {
                let arg = if arg.is_empty() { "64" } else { arg };
                let size = parse_bytes(arg).ok_or_else(|| format!("workload '{s}': bad size '{arg}' ({HELP})"))?;
                if size > super::protocol::MAX_PAYLOAD as u64 {
                    return Err(format!("workload '{s}': echo payload above 1MiB ({HELP})"));
                }
                Ok(Workload::Echo(size as usize))
            }
            "procs" => {
                let arg = if arg.is_empty() { "2" } else { arg };
                match arg.parse::<u16>() {
                    Ok(k) if (1..=1000).contains(&k) => Ok(Workload::Procs(k)),
                    _ => Err(format!("workload '{s}': bad k '{arg}' ({HELP})")),
                }
            }
            _ => Err(format!("unknown workload '{s}' ({HELP})")),
        }
    }
}

/// A byte count with an optional binary unit: 64, 4K, 4KiB, 1M, 1MiB.
fn parse_bytes(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&b| b > 0)
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Echo(n) => write!(f, "echo:{n}"),
            Workload::Procs(k) => write!(f, "procs:{k}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!("echo:64".parse(), Ok(Workload::Echo(64)));
        assert_eq!("echo:4K".parse(), Ok(Workload::Echo(4096)));
        assert_eq!("procs:2".parse(), Ok(Workload::Procs(2)));
        assert_eq!(Workload::Echo(64).to_string(), "echo:64");
        assert!("echo:2M".parse::<Workload>().is_err());
        assert!("procs:0".parse::<Workload>().is_err());
        assert!("ftp:1".parse::<Workload>().unwrap_err().contains("accepted"));
    }
}
