//! Human formatting of numbers and byte counts, shared by the terminal tables and the report.

/// The binary units byte counts are written and read in, largest first.
const BYTE_UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];

/// Format a byte count the way the CLI accepts it: 64B, 4KiB, 1MiB, 1.5MiB, 2.0TiB.
pub fn format_bytes(bytes: u64) -> String {
    for (name, unit) in BYTE_UNITS {
        if bytes >= unit {
            return if bytes % unit == 0 {
                format!("{}{name}", bytes / unit)
            } else {
                format!("{:.1}{name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes}B")
}

/// A byte count exactly, in the largest binary unit that divides it (`65537MiB`, `1025KiB`,
/// `100B`): for messages that name the size the user gave, where `format_bytes` would round
/// 65537M to "64.0GiB" and seem to name an accepted size.
pub fn format_bytes_exact(bytes: u64) -> String {
    for (name, unit) in BYTE_UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// What a size flag accepts, for the messages of `parse_size` and of the lists built on it.
pub const SIZE_HELP: &str = "accepted: a byte count like 64, 4K, 4KiB, 1M, 16MiB, 1G (binary units), a list 1K,64K, or a range A..B: both ends and every power of two between them (1K..16M; 1K..3K is 1K,2K,3K)";

/// One byte size, as every flag, workload argument and setting reads it: `64`, `4K`, `4KiB`,
/// `4k`, `1M`, `1MiB`, `1G`, `1T`: the units `format_bytes` writes. Zero is refused.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!("'{text}' is not a size ({SIZE_HELP})"));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is too large ({SIZE_HELP})"))?;
    let multiplier: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("'{text}' has an unknown unit '{suffix}' ({SIZE_HELP})")),
    };
    let bytes = number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("'{text}' is too large ({SIZE_HELP})"))?;
    if bytes == 0 {
        return Err(format!("size must be at least 1 byte, got '{text}'"));
    }
    Ok(bytes)
}

/// A number with about four significant digits, or "n/a" when missing or not finite.
pub fn format_number(value: Option<f64>) -> String {
    match value {
        None => "n/a".into(),
        Some(v) if !v.is_finite() => "n/a".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) if v.abs() >= 0.01 => format!("{v:.3}"),
        // Three significant digits as a plain decimal (0.000123, not 1.23e-4, which a
        // reader of a Gbit/s column takes for a typo); scientific only below a millionth.
        Some(v) if v.abs() >= 1e-6 => {
            let decimals = (-v.abs().log10()).floor() as usize + 3;
            format!("{v:.decimals$}")
        }
        Some(v) => format!("{v:.2e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_labels() {
        assert_eq!(format_bytes(64), "64B");
        assert_eq!(format_bytes(4096), "4KiB");
        assert_eq!(format_bytes(1 << 20), "1MiB");
        assert_eq!(format_bytes(1536), "1.5KiB");
        assert_eq!(super::format_bytes_exact(65537 << 20), "65537MiB");
        assert_eq!(super::format_bytes_exact(64 << 30), "64GiB");
        assert_eq!(super::format_bytes(3 << 39), "1.5TiB");
        assert_eq!(super::format_bytes_exact(1025), "1025B");
    }

    #[test]
    fn numbers() {
        assert_eq!(format_number(None), "n/a");
        assert_eq!(format_number(Some(f64::NAN)), "n/a");
        assert_eq!(format_number(Some(0.0)), "0");
        assert_eq!(format_number(Some(12345.6)), "12346");
        assert_eq!(format_number(Some(1.234)), "1.23");
        assert_eq!(format_number(Some(0.0001234)), "0.000123");
        assert_eq!(format_number(Some(0.00999)), "0.00999");
        assert_eq!(format_number(Some(-0.005)), "-0.00500");
        assert_eq!(format_number(Some(3e-9)), "3.00e-9");
    }
}

/// A duration in seconds for people: `850 ms`, `42 s`, `3 min 20 s`, `1 h 05 min`.
pub fn format_duration_s(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "n/a".into();
    }
    if seconds < 1.0 {
        return format!("{:.0} ms", seconds * 1e3);
    }
    let whole = seconds.round() as u64;
    match whole {
        0..=59 => format!("{whole} s"),
        60..=3599 => format!("{} min {:02} s", whole / 60, whole % 60),
        _ => format!("{} h {:02} min", whole / 3600, (whole % 3600) / 60),
    }
}

#[cfg(test)]
mod duration_tests {
    use super::format_duration_s;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(format_duration_s(0.85), "850 ms");
        assert_eq!(format_duration_s(42.2), "42 s");
        assert_eq!(format_duration_s(200.0), "3 min 20 s");
        assert_eq!(format_duration_s(3900.0), "1 h 05 min");
    }
}

/// A whole number from `lo` to `hi`, with a message that says what is true: digits outside the
/// range (or too many of them to fit any integer) are "out of range lo..hi", anything else is
/// "not a whole number"; `what` names the value (`mtu`).
pub fn whole_in(what: &str, text: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} '{text}' is not a whole number (accepted: {lo}..{hi})"));
    }
    match t.parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("{what} {t} is out of range {lo}..{hi}")),
    }
}

/// Text that came from somewhere else (a run name or label stored in the database, a
/// server's refusal line, an error from a peer) made safe for a terminal: every control
/// character — C0 (ESC, BEL, CR, LF, TAB, …), DEL and C1 (U+0080..U+009F, among them the
/// 8-bit CSI and OSC) — is written as a visible escape (`\x1b`, `\u{9b}`), and so are the
/// bidirectional overrides and isolates that reorder what follows them. A backslash is
/// doubled so the escaped text cannot be mistaken for an escape. Printable text, including
/// any other Unicode, is unchanged (and then no copy is made).
pub fn escape_control(text: &str) -> std::borrow::Cow<'_, str> {
    fn needs(c: char) -> bool {
        c.is_control() || c == '\\' || invisible(c)
    }
    if !text.chars().any(needs) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x80 && needs(c) => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A character a terminal shows as nothing or that changes how the text around it shows:
/// Unicode's format characters (bidirectional embeddings, overrides, isolates and marks,
/// zero-width spaces and joiners, the byte-order mark, soft hyphen, invisible operators,
/// interlinear annotation, tags), the line and paragraph separators, and the unassigned ends
/// of a plane (noncharacters). Both escapes make them visible as `\u{...}`.
pub fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{34f}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    ) || (c as u32 & 0xfffe) == 0xfffe
        || ('\u{fdd0}'..='\u{fdef}').contains(&c)
}

/// [`escape_control`] for whole blocks of output (tables, error lines): line feeds and tabs,
/// which the program writes itself, are kept, every other control character is made
/// visible, and backslashes are left alone (JSON and paths in the text stay as they are).
pub fn escape_control_keep_lines(text: &str) -> std::borrow::Cow<'_, str> {
    fn needs(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t') || invisible(c)
    }
    if !text.chars().any(needs) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if (c as u32) < 0x80 && needs(c) => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// An error and its causes as one line (`{e:#}`), each context said once: where a layer adds
/// the words the layer below already said ("the run failed: the run failed: ..."), or a peer's
/// message is wrapped in the same words again, the repeat is dropped. Every error that becomes
/// text — printed, stored with a failed cell, sent to a peer — goes through it.
pub fn error_text(e: &anyhow::Error) -> String {
    said_once(&format!("{e:#}"))
}

/// `text` with each `: `-separated part that repeats the part just before it dropped.
pub fn said_once(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split(": ") {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    parts.join(": ")
}

/// `eprintln!` with [`escape_control_keep_lines`] applied to the whole line: what every
/// message to stderr goes through, so a name, label or peer's words in it reach the terminal
/// as visible text (stdout's equivalent is `cli::output::out`).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::format::escape_control_keep_lines(&format!($($arg)*)))
    };
}

/// `eprint!` through the same escape as [`tell!`].
#[macro_export]
macro_rules! tell_part {
    ($($arg:tt)*) => {
        eprint!("{}", $crate::format::escape_control_keep_lines(&format!($($arg)*)))
    };
}

/// A text cell for a CSV file that a spreadsheet will open, neutralised against formula
/// injection: a cell starting with `=`, `+`, `-`, `@`, TAB or CR is prefixed with `'` (the
/// spreadsheet then shows it as text), unless the whole cell is a number (`-1.5`, `+3`), which
/// stays a number. Call it on text columns (names, labels, errors, warnings), not on numbers
/// the program formatted itself.
pub fn spreadsheet_safe(cell: &str) -> std::borrow::Cow<'_, str> {
    let risky = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if !risky || cell.trim().parse::<f64>().is_ok_and(f64::is_finite) {
        return std::borrow::Cow::Borrowed(cell);
    }
    std::borrow::Cow::Owned(format!("'{cell}"))
}

#[cfg(test)]
mod escape_tests {
    use super::{escape_control, escape_control_keep_lines, spreadsheet_safe};

    #[test]
    fn an_error_says_each_context_once() {
        use anyhow::Context;
        let inner: anyhow::Result<()> = Err(anyhow::anyhow!("the peer hung up"));
        let e = inner
            .context("reading the report")
            .context("reading the report")
            .unwrap_err();
        assert_eq!(super::error_text(&e), "reading the report: the peer hung up");
        let wrapped = anyhow::anyhow!("agent 10.0.0.9:7000: the run failed: {}", "the run failed: gone");
        assert_eq!(super::error_text(&wrapped), "agent 10.0.0.9:7000: the run failed: gone");
        assert_eq!(super::said_once("a: b: a: b"), "a: b: a: b");
    }

    #[test]
    fn terminal_control_sequences_become_visible() {
        // Set the window title, clear the screen, OSC 52 clipboard write, 8-bit CSI, BEL.
        assert_eq!(escape_control("a\x1b]0;owned\x07b"), "a\\x1b]0;owned\\x07b");
        assert_eq!(escape_control("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
        assert_eq!(escape_control("\x1b]52;c;aGk=\x1b\\"), "\\x1b]52;c;aGk=\\x1b\\\\");
        assert_eq!(escape_control("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(escape_control("a\rb\nc\td\x7f"), "a\\x0db\\x0ac\\x09d\\x7f");
        assert_eq!(escape_control("abc\u{202e}fed"), "abc\\u{202e}fed");
        // Marks, isolates, zero-width characters, the BOM, tags, separators: each made visible.
        for c in [
            '\u{200f}',
            '\u{200e}',
            '\u{61c}',
            '\u{2067}',
            '\u{200b}',
            '\u{2060}',
            '\u{feff}',
            '\u{e0041}',
            '\u{2029}',
            '\u{ad}',
        ] {
            let shown = escape_control_keep_lines(&format!("a{c}b")).into_owned();
            assert_eq!(shown, format!("a\\u{{{:x}}}b", c as u32));
            assert_eq!(escape_control(&format!("a{c}b")), shown);
        }
        assert_eq!(escape_control("naïve 64KiB µs"), "naïve 64KiB µs");
        assert!(matches!(escape_control("plain"), std::borrow::Cow::Borrowed(_)));
        let block = "name\tx\\y\n\x1b]52;c;aGk=\x07\u{9d}\n";
        assert_eq!(
            super::escape_control_keep_lines(block),
            "name\tx\\y\n\\x1b]52;c;aGk=\\x07\\u{9d}\n"
        );
    }

    #[test]
    fn whole_numbers_out_of_range_say_so() {
        use super::whole_in;
        assert_eq!(whole_in("mtu", "9000", 68, 65535), Ok(9000));
        assert_eq!(
            whole_in("mtu", "70000", 68, 65535).unwrap_err(),
            "mtu 70000 is out of range 68..65535"
        );
        assert_eq!(
            whole_in("mtu", "99999999999999999999999", 68, 65535).unwrap_err(),
            "mtu 99999999999999999999999 is out of range 68..65535"
        );
        assert!(whole_in("mtu", "9k", 68, 65535)
            .unwrap_err()
            .contains("not a whole number"));
    }

    #[test]
    fn formulas_are_neutralised_numbers_are_not() {
        for f in [
            "=1+1",
            "+cmd|' /C calc'!A0",
            "-2+3",
            "@SUM(A1)",
            "\t=1",
            "\r=1",
            "=HYPERLINK(\"x\")",
        ] {
            assert_eq!(spreadsheet_safe(f), format!("'{f}"), "{f:?}");
        }
        for n in ["-1.5", "+3", "-0", "12", "stream", "", "a=b"] {
            assert_eq!(spreadsheet_safe(n), n, "{n:?}");
        }
    }
}
