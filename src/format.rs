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
