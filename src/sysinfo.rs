//! The machine description recorded with every run (being built in the micro/sysinfo issue).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub kernel: Option<String>,
}

/// Describe this machine and its environment.
pub fn describe() -> Machine {
    Machine {
        kernel: crate::sys::procfs::read_trimmed("/proc/sys/kernel/osrelease"),
    }
}
