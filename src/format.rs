//! Human formatting of numbers and byte counts, shared by the terminal tables and the report.

/// Format a byte count the way the CLI accepts it: 64B, 4KiB, 1MiB, 1.5MiB.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, unit) in UNITS {
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

/// Text from another machine (a server's refusal, a client's hello) made safe to print on a
/// terminal: control characters (C0, DEL, C1: escape sequences, carriage returns, line breaks)
/// and the bidirectional overrides that reorder what is shown are written as Rust escapes
/// (`\u{1b}`), everything else as it is.
pub fn sanitize_for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
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
        Some(v) => format!("{v:.2e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_text_cannot_drive_the_terminal() {
        assert_eq!(sanitize_for_terminal("busy: try again"), "busy: try again");
        assert_eq!(
            sanitize_for_terminal("a\u{1b}[2Jb\rc\nd\u{9b}e\u{202e}f"),
            "a\\u{1b}[2Jb\\rc\\nd\\u{9b}e\\u{202e}f"
        );
        assert_eq!(sanitize_for_terminal("größe 4 KiB"), "größe 4 KiB");
    }

    #[test]
    fn byte_labels() {
        assert_eq!(format_bytes(64), "64B");
        assert_eq!(format_bytes(4096), "4KiB");
        assert_eq!(format_bytes(1 << 20), "1MiB");
        assert_eq!(format_bytes(1536), "1.5KiB");
    }

    #[test]
    fn numbers() {
        assert_eq!(format_number(None), "n/a");
        assert_eq!(format_number(Some(f64::NAN)), "n/a");
        assert_eq!(format_number(Some(0.0)), "0");
        assert_eq!(format_number(Some(12345.6)), "12346");
        assert_eq!(format_number(Some(1.234)), "1.23");
        assert_eq!(format_number(Some(0.0001234)), "1.23e-4");
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
