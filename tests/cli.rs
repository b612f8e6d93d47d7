//! What the command line says when it is called wrongly: one line, exit 2, and what is accepted.

mod common;

use common::usage_error as one_line_error;

/// Found in review: only clap's first line was printed, which dropped the missing argument's
/// name, the possible values and the list of subcommands.
#[test]
fn usage_errors_name_what_is_accepted() {
    assert!(one_line_error(&["compare", "1"]).contains("<RUN_B>"));
    assert!(one_line_error(&["export", "--format", "xml"]).contains("csv, json"));
    assert!(one_line_error(&["micro", "bogus"]).contains("accepted: list, all, timer"));
    assert!(one_line_error(&["bogus"]).contains("net, quick, sweep"));
    assert!(one_line_error(&["net", "strem"]).contains("stream"));
}
