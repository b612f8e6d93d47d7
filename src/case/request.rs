//! What the clients of a servers case ask for: `echo:<bytes>` or `procs:<k>` (`--workload`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// One kind of request. Serialises as its text (`echo:64`, `procs:2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Request {
    /// Echo a payload of this many bytes.
    Echo(usize),
    /// The top-k CPU consumers.
    Procs(u16),
}

impl Request {
    /// The largest echo payload (the protocol's frame limit).
    pub const MAX_ECHO_BYTES: usize = 1 << 20;
}

const HELP: &str = "accepted: echo:<bytes> (e.g. echo:64, echo:4K, up to 1MiB) or procs:<k> (e.g. procs:2, k 1..1000)";

impl std::str::FromStr for Request {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, arg) = s.trim().split_once(':').unwrap_or((s.trim(), ""));
        match kind {
            "echo" => {
                let arg = if arg.is_empty() { "64" } else { arg };
                let size =
                    crate::format::parse_size(arg).map_err(|_| match arg.bytes().all(|b| b.is_ascii_digit()) {
                        true => format!("workload '{s}': size {arg} is out of range 1..1MiB ({HELP})"),
                        false => format!("workload '{s}': bad size '{arg}' ({HELP})"),
                    })?;
                if size > Request::MAX_ECHO_BYTES as u64 {
                    return Err(format!("workload '{s}': echo payload above 1MiB ({HELP})"));
                }
                Ok(Request::Echo(size as usize))
            }
            "procs" => {
                let arg = if arg.is_empty() { "2" } else { arg };
                match arg.parse::<u16>() {
                    Ok(k) if (1..=1000).contains(&k) => Ok(Request::Procs(k)),
                    _ if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) => {
                        Err(format!("workload '{s}': k {arg} is out of range 1..1000 ({HELP})"))
                    }
                    _ => Err(format!("workload '{s}': bad k '{arg}' ({HELP})")),
                }
            }
            _ => Err(format!("unknown workload '{s}' ({HELP})")),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Echo(n) => write!(f, "echo:{n}"),
            Request::Procs(k) => write!(f, "procs:{k}"),
        }
    }
}

impl Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!("echo:64".parse(), Ok(Request::Echo(64)));
        assert_eq!("echo:4K".parse(), Ok(Request::Echo(4096)));
        assert_eq!("procs:2".parse(), Ok(Request::Procs(2)));
        assert_eq!(Request::Echo(64).to_string(), "echo:64");
        assert_eq!(serde_json::to_string(&Request::Procs(3)).unwrap(), "\"procs:3\"");
        assert!("echo:2M".parse::<Request>().is_err());
        assert!("procs:0".parse::<Request>().is_err());
        assert!("ftp:1".parse::<Request>().unwrap_err().contains("accepted"));
    }
}
