//! scripts/sendfile_vs_iperf3.sh's interval line (issue 36.5): the median of the per-round
//! ratios, the order-statistic interval with its exact coverage, and the verdict. `--ratios`
//! computes the line from given ratios without running anything, so the arithmetic is checked
//! here on fixed inputs (no network, no iperf3).

mod common;

use std::process::Command;

fn script() -> String {
    format!("{}/scripts/sendfile_vs_iperf3.sh", env!("CARGO_MANIFEST_DIR"))
}

/// The script's line for `ratios`, or None (skipped) without bash or awk.
fn finding(ratios: &[&str]) -> Option<String> {
    for tool in ["bash", "awk"] {
        if let Some(missing) = common::missing_program(tool) {
            common::skip(&missing);
            return None;
        }
    }
    let out = Command::new("bash")
        .arg(script())
        .arg("--ratios")
        .args(ratios)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn the_interval_is_the_order_statistics_with_their_binomial_coverage() {
    // 6 rounds: min..max holds the median with 1 - 2/64 = 96.9 %; all below 1: behind.
    let Some(line) = finding(&["0.75", "0.94", "0.85", "0.80", "0.90", "0.88"]) else {
        return;
    };
    assert_eq!(
        line,
        "A/B: median 0.865, interval 0.750..0.940 (order statistics 1 and 6 of 6, coverage 96.9%): iopath behind iperf3 -Z"
    );
    // 10 rounds: the 2nd and 9th (1 - 2 * 11/1024 = 97.9 %; the 3rd and 8th would be 89.1 %),
    // holding 1: within.
    let line = finding(&[
        "0.95", "1.04", "1.10", "1.20", "0.99", "1.01", "1.02", "1.03", "1.05", "1.06",
    ])
    .unwrap();
    assert!(
        line.ends_with(
            "interval 0.990..1.100 (order statistics 2 and 9 of 10, coverage 97.9%): within: the interval holds 1"
        ),
        "{line}"
    );
    // 20 rounds, all above 1: the 6th and 15th (95.9 %), ahead.
    let twenty: Vec<String> = (1..=20).map(|i| format!("1.{i:02}")).collect();
    let twenty: Vec<&str> = twenty.iter().map(String::as_str).collect();
    let line = finding(&twenty).unwrap();
    assert!(
        line.contains("(order statistics 6 and 15 of 20, coverage 95.9%): iopath ahead of iperf3 -Z"),
        "{line}"
    );
}

#[test]
fn fewer_than_six_rounds_say_their_coverage_and_give_no_verdict() {
    // 5 rounds (the run): min..max covers 1 - 2/32 = 93.8 %, short of 95 %.
    let Some(line) = finding(&["0.75", "0.94", "0.85", "0.80", "0.90"]) else {
        return;
    };
    assert_eq!(
        line,
        "A/B: median 0.850, interval 0.750..0.940 (order statistics 1 and 5 of 5, coverage 93.8%, short of 95%: 5 rounds; 6 or more give one): no verdict at this coverage"
    );
}

#[test]
fn ratios_that_are_not_numbers_are_one_line_and_exit_2() {
    if common::missing_program("bash").is_some() {
        common::skip("bash is not installed");
        return;
    }
    for args in [&[][..], &["x"], &["0.9", "-1"]] {
        let out = Command::new("bash")
            .arg(script())
            .arg("--ratios")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("--ratios takes"), "{args:?}: {err}");
    }
}
