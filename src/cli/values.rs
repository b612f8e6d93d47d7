//! Parsers for the values flags take: byte sizes and ranges, durations, CPU lists, lists.
//! Each error message says what was wrong and what is accepted.

use std::time::Duration;

// List types for clap fields. clap treats a field spelled `Vec<T>` as "repeat the flag"; these
// aliases make it keep the whole parsed list as one value.
pub type SizeList = Vec<u64>;
pub type CountList = Vec<usize>;
pub type CpuList = Vec<usize>;

pub use crate::format::parse_size;
use crate::format::SIZE_HELP;

/// A list of sizes: comma-separated sizes and ranges `A..B`. A range is both of its ends and
/// every power of two strictly between them: `1K..8K` is 1K,2K,4K,8K; `1K..3K` is 1K,2K,3K;
/// `100..300` is 100,128,256,300. The flags' help says the same (see the unit tests).
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, String> {
    parse_range_list(text, SIZE_HELP, parse_size)
}

/// The list grammar every sized or counted list flag shares: comma-separated items and
/// ranges `A..B`, a range being both of its ends and every power of two strictly between
/// them; each item read by `one`, each value kept once in the order first given. `help` says
/// what is accepted.
fn parse_range_list(text: &str, help: &str, one: impl Fn(&str) -> Result<u64, String>) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("'{text}' has an empty item ({help})"));
        }
        match part.split_once("..") {
            Some((a, b)) => {
                let (lo, hi) = (one(a)?, one(b)?);
                if lo > hi {
                    return Err(format!("range '{part}' runs backwards ({help})"));
                }
                let mut v = lo;
                while v < hi {
                    out.push(v);
                    // The next power of two above v; past u64's, the range ends at hi.
                    v = match v.checked_add(1).and_then(u64::checked_next_power_of_two) {
                        Some(next) => next,
                        None => hi,
                    };
                }
                out.push(hi);
            }
            None => out.push(one(part)?),
        }
    }
    dedup_keep_order(&mut out);
    Ok(out)
}

/// A duration: `5s`, `500ms`, `250us`, `1m`, `1.5s`, `1h`, or a bare number of seconds. Must be
/// > 0 and at most 24 h.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let help = "accepted: a positive duration like 5s, 500ms, 250us, 1.5s, 2m, 1h";
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration ({help})"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("'{text}' has an unknown unit '{unit}' ({help})")),
    };
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 86_400.0 {
        return Err(format!("'{text}' is out of range ({help}, at most 24h)"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Like `parse_duration` but zero (`0`, `0s`, `0ms`) is allowed, e.g. for "no warm-up".
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.parse::<f64>() == Ok(0.0) && ["", "s", "ms", "us", "µs", "m", "min", "h"].contains(&unit) {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// A run id as the user typed it (`report 3`, `--resume 3`, `a.db:3`): a whole number; one too
/// large for any run is "no run", not a parse failure or a database name.
pub fn parse_run_id(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{text}' is not a run id (accepted: a whole number; `iopath runs` lists them)"
        ));
    }
    t.parse::<i64>().map_err(|_| {
        format!(
            "no run {t}: run ids go from 1 to {} (`iopath runs` lists them)",
            i64::MAX
        )
    })
}

/// The longest `--name` accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// A run name (`--name`): 1 to [`MAX_NAME_CHARS`] characters, no control characters (a name
/// is printed by `runs`, `compare` and the report).
pub fn parse_name(text: &str) -> Result<String, String> {
    let count = text.chars().count();
    if text.trim().is_empty() {
        return Err("the name is empty (accepted: 1 to 200 characters of text)".into());
    }
    if count > MAX_NAME_CHARS {
        return Err(format!(
            "the name is {count} characters long (accepted: at most {MAX_NAME_CHARS})"
        ));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the name holds the control character {:?} (accepted: printable text, at most {MAX_NAME_CHARS} characters)",
            c
        ));
    }
    Ok(text.to_string())
}

/// The largest count a list accepts (threads, clients, processes: each flag has its own,
/// smaller limit), checked before anything is expanded.
pub const MAX_COUNT: usize = 1_000_000;

/// A list of positive whole numbers: `1,2,4,8` or ranges `A..B`, which are both ends and every
/// power of two strictly between them (`1..8` is 1,2,4,8; `3..10` is 3,4,8,10), e.g. threads.
pub fn parse_count_list(text: &str) -> Result<Vec<usize>, String> {
    parse_counts_up_to::<MAX_COUNT>(text)
}

/// [`parse_count_list`] with a flag's own bound `MAX`, so the parser and the workload's own
/// check say the same range (`--threads` of the network commands: 1 to
/// `net::session::MAX_THREADS`), whatever the value.
pub fn parse_counts_up_to<const MAX: usize>(text: &str) -> Result<Vec<usize>, String> {
    let help = "accepted: positive whole numbers like 1,2,4, or a range A..B: both ends and every power of two between them (1..8; 3..10 is 3,4,8,10)";
    let one = |s: &str| -> Result<usize, String> {
        let t = s.trim();
        match t.parse::<usize>() {
            Ok(0) => Err(format!("'{s}' must be at least 1 ({help})")),
            Ok(n) if n <= MAX => Ok(n),
            _ if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                Err(format!("'{s}' is too large (accepted: 1 to {MAX})"))
            }
            _ => Err(format!("'{s}' is not a positive whole number ({help})")),
        }
    };
    let counts = parse_range_list(text, help, |s| one(s).map(|n| n as u64))?;
    // Every value is at most MAX, a usize.
    Ok(counts.into_iter().map(|n| n as usize).collect())
}

/// A CPU list: `0`, `0,1`, `0-3`. Each CPU must exist on this machine.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let help = "accepted: CPU numbers like 0, 0,1 or 0-3";
    let Some(cpus) = crate::sys::procfs::parse_cpu_list(text).filter(|c| !c.is_empty()) else {
        // Well-formed but with a CPU number no machine has: out of range, not "not a list".
        let max = crate::sys::procfs::MAX_CPU;
        let well_formed = !text.trim().is_empty()
            && text.trim().split(',').all(|p| {
                let mut ends = p.split('-');
                let ok = |e: Option<&str>| {
                    e.is_some_and(|e| !e.trim().is_empty() && e.trim().bytes().all(|b| b.is_ascii_digit()))
                };
                let first = ends.next();
                match (first, ends.next(), ends.next()) {
                    (a, None, None) => ok(a),
                    (a, b, None) => ok(a) && ok(b),
                    _ => false,
                }
            });
        if well_formed {
            if let Some(big) = text
                .split([',', '-'])
                .map(str::trim)
                .find(|n| n.parse::<usize>().map_or(true, |n| n > max))
            {
                return Err(format!("CPU {big} is out of range 0..{max} ({help})"));
            }
        }
        return Err(format!("'{text}' is not a CPU list ({help})"));
    };
    let present = crate::sys::procfs::online_cpus();
    if let Some(bad) = cpus.iter().find(|c| !present.contains(c)) {
        return Err(format!("CPU {bad} is not online here (online: {})", join(&present)));
    }
    Ok(cpus)
}

fn join(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// The items of a list flag (`--mode a,b,a`), each once, in the order first given.
pub fn distinct<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut items = items.to_vec();
    dedup_keep_order(&mut items);
    items
}

fn dedup_keep_order<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen: Vec<T> = Vec::with_capacity(v.len());
    v.retain(|x| {
        if seen.contains(x) {
            false
        } else {
            seen.push(*x);
            true
        }
    });
}

/// A unit test's parse of one command's flags (`A`, a clap `Args` struct) from `argv`, the
/// command's name left out: what the `net` commands' tests check their grids with.
#[cfg(test)]
pub(crate) fn parse_flags<A: clap::Args + clap::FromArgMatches>(argv: &[&str]) -> Result<A, clap::Error> {
    let mut matches = A::augment_args(clap::Command::new("iopath"))
        .try_get_matches_from(std::iter::once("iopath").chain(argv.iter().copied()))?;
    A::from_arg_matches_mut(&mut matches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Found by attack: ranges near u64::MAX looped until memory ran out or overflowed.
    #[test]
    fn huge_counts_and_cpu_ranges_are_refused_before_expanding() {
        for text in [
            "1..18446744073709551615",
            "18446744073709551615",
            "99999999999999999999999",
            "1..1000001",
        ] {
            let err = parse_count_list(text).unwrap_err();
            assert!(err.contains("too large") || err.contains("accepted"), "{text}: {err}");
        }
        assert_eq!(parse_count_list("1..1000000").unwrap().len(), 21);
        assert!(parse_cpu_list("0-18446744073709551615").is_err());
        assert!(parse_cpu_list("0-4294967296").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert!(parse_size("abc").unwrap_err().contains("accepted"));
        assert!(parse_size("0").unwrap_err().contains("at least 1"));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999").is_err());
    }

    #[test]
    fn size_ranges() {
        assert_eq!(parse_size_list("1K..8K").unwrap(), vec![1024, 2048, 4096, 8192]);
        assert_eq!(parse_size_list("64,1K..2K").unwrap(), vec![64, 1024, 2048]);
        assert_eq!(parse_size_list("100..300").unwrap(), vec![100, 128, 256, 300]);
        assert!(parse_size_list("8K..1K").is_err());
        assert!(parse_size_list("1K,,2K").is_err());
    }

    /// Ranges behave as their help says: both ends, and every power of two between them.
    #[test]
    fn ranges_are_both_ends_and_the_powers_of_two_between() {
        const K: u64 = 1024;
        assert_eq!(parse_size_list("1K..3K").unwrap(), vec![K, 2 * K, 3 * K]);
        assert_eq!(parse_size_list("3K..16K").unwrap(), vec![3 * K, 4 * K, 8 * K, 16 * K]);
        assert_eq!(parse_size_list("1K..1K").unwrap(), vec![K]);
        assert_eq!(parse_size_list("1..4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_count_list("3..10").unwrap(), vec![3, 4, 8, 10]);
        assert_eq!(parse_count_list("1..3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_count_list("5..5").unwrap(), vec![5]);
        // The help texts describe exactly this.
        assert!(SIZE_HELP.contains("1K..3K is 1K,2K,3K"), "{SIZE_HELP}");
        assert!(parse_count_list("x").unwrap_err().contains("3..10 is 3,4,8,10"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("0s").is_err());
        // The limit is written "24h", so `h` is a unit it accepts.
        assert_eq!(parse_duration("5h"), Ok(Duration::from_secs(5 * 3600)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("25h").unwrap_err().contains("out of range"));
        assert!(parse_duration("5d").is_err());
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        // Found by attack: trailing junk after a zero was accepted as "no warm-up".
        assert!(parse_duration_or_zero("0y").is_err());
        assert!(parse_duration_or_zero("0abc").is_err());
    }

    #[test]
    fn run_ids_and_names() {
        assert_eq!(parse_run_id("3"), Ok(3));
        assert!(parse_run_id("99999999999999999999")
            .unwrap_err()
            .starts_with("no run 99999999999999999999"));
        assert!(parse_run_id("x").unwrap_err().contains("not a run id"));
        assert_eq!(parse_name("baseline").as_deref(), Ok("baseline"));
        assert!(parse_name(&"x".repeat(201)).is_err());
        assert!(parse_name(&"é".repeat(200)).is_ok());
        assert!(parse_name("a\u{9b}b").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count_list("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_count_list("1..8").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(parse_count_list("3..10").unwrap(), vec![3, 4, 8, 10]);
        assert!(parse_count_list("0").is_err());
        assert!(parse_count_list("x").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert!(parse_cpu_list("9999").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    proptest! {
        #[test]
        fn size_list_items_lie_in_the_range(lo in 1u64..1_000_000, span in 0u64..100_000_000) {
            let hi = lo + span;
            let list = parse_size_list(&format!("{lo}..{hi}")).unwrap();
            prop_assert_eq!(list[0], lo);
            prop_assert_eq!(*list.last().unwrap(), hi);
            prop_assert!(list.windows(2).all(|w| w[0] < w[1]));
            // Everything between the ends is a power of two, and none is skipped.
            // A range of one value (`lo..lo`) is that value alone: nothing between its ends.
            let inner = list.get(1..list.len() - 1).unwrap_or_default();
            prop_assert!(inner.iter().all(|v| v.is_power_of_two()));
            let powers = (0..64).map(|i| 1u64 << i).filter(|p| *p > lo && *p < hi).count();
            prop_assert_eq!(inner.len(), powers);
        }

        #[test]
        fn count_ranges_are_both_ends_and_the_powers_between(lo in 1usize..5000, span in 0usize..100_000) {
            let hi = lo + span;
            let list = parse_count_list(&format!("{lo}..{hi}")).unwrap();
            prop_assert_eq!(list[0], lo);
            prop_assert_eq!(*list.last().unwrap(), hi);
            // A range of one value (`lo..lo`) is that value alone: nothing between its ends.
            let inner = list.get(1..list.len() - 1).unwrap_or_default();
            prop_assert!(inner.iter().all(|v| v.is_power_of_two()));
            let powers = (0..40).map(|i| 1usize << i).filter(|p| *p > lo && *p < hi).count();
            prop_assert_eq!(inner.len(), powers);
        }
    }
}
