//! The server concurrency models a servers case can run (`--model`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// How a server gives connections a thread's attention. Serialises as its name (`epoll-et`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Model {
    /// One connection at a time, blocking calls.
    Iterative,
    /// A new thread per connection, blocking calls.
    Threads,
    /// A fixed pool of threads sharing one epoll instance (EPOLLONESHOT hands each ready
    /// connection to exactly one worker).
    Pool,
    /// One thread, select(2).
    Select,
    /// One thread, poll(2).
    Poll,
    /// One thread, epoll level-triggered.
    Epoll,
    /// One thread, epoll edge-triggered (reads and writes until EAGAIN).
    EpollEt,
    /// One thread, io_uring accept/recv/send completions.
    Uring,
}

impl Model {
    pub const ALL: [Model; 8] = [
        Model::Iterative,
        Model::Threads,
        Model::Pool,
        Model::Select,
        Model::Poll,
        Model::Epoll,
        Model::EpollEt,
        Model::Uring,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Model::Iterative => "iterative",
            Model::Threads => "threads",
            Model::Pool => "pool",
            Model::Select => "select",
            Model::Poll => "poll",
            Model::Epoll => "epoll",
            Model::EpollEt => "epoll-et",
            Model::Uring => "uring",
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let alias = match s {
            "epoll-lt" => "epoll",
            "io_uring" | "io-uring" => "uring",
            "thread" | "thread-per-conn" => "threads",
            other => other,
        };
        Model::ALL.into_iter().find(|m| m.as_str() == alias).ok_or_else(|| {
            let accepted: Vec<&str> = Model::ALL.iter().map(|m| m.as_str()).collect();
            format!("unknown model '{s}' (accepted: {})", accepted.join(", "))
        })
    }
}

super::choice_parser!(Model);

impl Serialize for Model {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Model {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_round_trip() {
        for m in Model::ALL {
            assert_eq!(m.as_str().parse::<Model>(), Ok(m));
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
        }
        assert_eq!("io_uring".parse::<Model>(), Ok(Model::Uring));
        assert!("forking".parse::<Model>().unwrap_err().contains("accepted"));
    }
}
