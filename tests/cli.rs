//! What the command line says when it is called wrongly: one line, exit 2, and what is accepted.

mod common;

use common::usage_error as one_line_error;

/// Found in review: only clap's first line was printed, which dropped the missing argument's
/// name, the possible values and the list of subcommands.
#[test]
fn usage_errors_name_what_is_accepted() {
    assert!(one_line_error(&["compare", "1"]).contains("<RUNS_B>"));
    assert!(one_line_error(&["export", "--format", "xml"]).contains("csv, json"));
    assert!(one_line_error(&["micro", "bogus"]).contains("accepted: all, timer"));
    assert!(one_line_error(&["bogus"]).contains("net, quick, run"));
    assert!(one_line_error(&["net", "strem"]).contains("stream"));
}

/// Messages say what is true: an out-of-range number is out of range (not "not a number"), a run
/// id too large for any run is "no run" (not "no database"), durations take the `h` their limit
/// is written in, and a refused size names the size given (not a rounded one that looks legal).
#[test]
fn messages_say_what_is_true() {
    let mtu = one_line_error(&["net", "stream", "--topology", "veth:mtu=99999999999"]);
    assert!(
        mtu.contains("out of range 68..65535") && !mtu.contains("not a number"),
        "{mtu}"
    );
    let mtu = one_line_error(&["net", "rr", "--topology", "veth:mtu=70000"]);
    assert!(mtu.contains("out of range 68..65535"), "{mtu}");
    let big = "99999999999999999999999";
    for args in [
        vec!["report", big],
        vec!["export", big],
        vec!["compare", big, "1"],
        vec!["compare", "1", &format!("other.db:{big}")],
        vec!["sweep", "--resume", big],
    ] {
        let e = one_line_error(&args);
        assert!(
            e.contains(&format!("no run {big}")) && !e.contains("database"),
            "{args:?}: {e}"
        );
    }
    let threads = one_line_error(&["servers", "--client-threads", big]);
    assert!(
        threads.contains("out of range") && !threads.contains("target type"),
        "{threads}"
    );
    let hours = one_line_error(&["net", "stream", "--duration", "25h"]);
    assert!(hours.contains("out of range") && hours.contains("24h"), "{hours}");
    let table = one_line_error(&["net", "records", "--table", "65537M"]);
    assert!(table.contains("65537MiB") && !table.contains("64.0GiB"), "{table}");
    for (args, needle) in [
        (vec!["net", "stream", "--client-cpus", big], "out of range 0..8191"),
        (
            vec!["net", "stream", "--server-cpus", "0-99999"],
            "CPU 99999 is out of range",
        ),
        (
            vec!["servers", "--request", &format!("procs:{big}")],
            "out of range 1..1000",
        ),
        (vec!["servers", "--request", &format!("echo:{big}")], "out of range"),
        (
            vec!["net", "stream", "--topology", &format!("veth:delay={big}ms")],
            "out of range 0..60s",
        ),
    ] {
        let e = one_line_error(&args);
        assert!(
            e.contains(needle) && !e.contains("not a") && !e.contains("bad "),
            "{args:?}: {e}"
        );
    }
    let size = one_line_error(&["net", "stream", "--size", "1025M"]);
    assert!(size.contains("1025MiB"), "{size}");
}

/// A value a flag's parser refuses reads like a refusal found after parsing: the flag, then
/// what is wrong and what is accepted; the value is named when the parser's words do not
/// quote it.
#[test]
fn a_refused_value_names_its_flag_first() {
    let threads = one_line_error(&["net", "stream", "--threads", "0"]);
    assert!(
        threads.starts_with("error: --threads: '0' must be at least 1 (accepted:"),
        "{threads}"
    );
    let cpus = one_line_error(&["servers", "--client-cpus", "x"]);
    assert!(
        cpus.starts_with("error: --client-cpus: 'x' is not a CPU list"),
        "{cpus}"
    );
    let big = one_line_error(&["servers", "--pool-size", "99999999999999999999999"]);
    assert!(
        big.starts_with("error: --pool-size '99999999999999999999999': out of range"),
        "{big}"
    );
    let remote = one_line_error(&["servers", "--topology", "remote:10.0.0.2:5201"]);
    assert!(
        remote.contains("servers starts its own (accepted: loopback"),
        "{remote}"
    );
}
