//! Where the buffers the kernel copies into and out of start (`--align`).

use serde::{Deserialize, Serialize};

/// The placement of every message field, wire buffer, receive buffer, ring slot and records
/// table of a network case. The kernel's copy to and from user space (`rep movsb` on x86) can
/// be many times slower when the user buffer and the kernel's page are mutually misaligned, so
/// where the buffers start is a condition of the measurement, recorded with the case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Align {
    /// Every buffer starts on a page boundary (the default).
    #[default]
    Page,
    /// Every buffer starts `MISALIGNED_OFFSET` (16) bytes past a page boundary: where glibc's
    /// malloc places blocks of 128 KiB and more, so the slow copy can be measured and shown.
    Misaligned,
    /// Wherever the allocator puts a plain `vec![0u8; n]`: how every buffer was placed before
    /// `--align` existed, and what cases stored then read as.
    Malloc,
}

/// Bytes past a page boundary of a `misaligned` buffer.
pub const MISALIGNED_OFFSET: usize = 16;

impl Align {
    pub const ALL: [Align; 3] = [Align::Page, Align::Misaligned, Align::Malloc];

    pub fn as_str(self) -> &'static str {
        match self {
            Align::Page => "page",
            Align::Misaligned => "misaligned",
            Align::Malloc => "malloc",
        }
    }

    /// What a case stored before `--align` existed reads as: its buffers came from the
    /// allocator.
    pub fn before_the_option() -> Align {
        Align::Malloc
    }

    /// Left out of a case's JSON when it is the placement of cases stored before the option,
    /// so their keys are unchanged.
    pub fn is_before_the_option(&self) -> bool {
        *self == Align::Malloc
    }
}

crate::choice::named_choices!(Align, "alignment");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for a in Align::ALL {
            assert_eq!(a.as_str().parse::<Align>(), Ok(a));
            assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{a}\""));
        }
        assert_eq!(
            "odd".parse::<Align>().unwrap_err(),
            "unknown alignment 'odd' (accepted: page, misaligned, malloc)"
        );
        assert_eq!(Align::default(), Align::Page);
    }
}
