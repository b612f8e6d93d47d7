//! What the network workloads do alike: the client driving the warm-up and measured window
//! with a remote server, and the warnings about where the threads ran. (A session server's
//! data port and report are in `net/session/data.rs`.)

use crate::measure::window::{SystemProbes, Window};
use crate::net::completions::CompletionCounts;
use crate::net::control::{Control, ControlChannel};
use crate::net::workload::stream::interrupted;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};
use crate::stop::Stop;
use anyhow::Context;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Warm up, open the window here and on the server (`Measure`), hold it for `duration`, close
/// it on both ends (`Done`); returns the system-wide probes' metrics. Returns early when a
/// client thread failed, and with `Interrupted` when a stop was requested (the window is
/// closed on both ends either way).
pub(crate) fn drive_phases(
    warmup: Duration,
    duration: Duration,
    window: &Window,
    system: &mut SystemProbes,
    failed: &AtomicBool,
    stop: Stop,
    control: &mut ControlChannel,
) -> anyhow::Result<Vec<Metric>> {
    let mut result = Ok(());
    if stop.sleep_watching(warmup, failed) {
        window.open(system);
        result = control
            .send(&Control::Measure)
            .context("the server closed the control connection");
        if result.is_ok() {
            stop.sleep_watching(duration, failed);
        }
    }
    let metrics = window.close(system);
    let done = control
        .send(&Control::Done)
        .context("the server closed the control connection");
    if stop.requested() {
        return Err(interrupted());
    }
    result.and(done).map(|()| metrics)
}

/// The zero-copy completion counts of a case's sockets as system metrics, in this order:
/// zerocopy_sends, zerocopy_completions, zerocopy_completed_sends, zerocopy_copied_sends.
pub(crate) fn push_completion_counts(obs: &mut Observation, c: &CompletionCounts) {
    obs.push(Metric::tool("zerocopy_sends", Role::System, c.sends as f64, "calls"));
    obs.push(Metric::tool(
        "zerocopy_completions",
        Role::System,
        c.notifications as f64,
        "notifications",
    ));
    obs.push(Metric::tool(
        "zerocopy_completed_sends",
        Role::System,
        c.completed as f64,
        "calls",
    ));
    obs.push(Metric::tool(
        "zerocopy_copied_sends",
        Role::System,
        c.copied as f64,
        "calls",
    ));
}

/// zerocopy_copied_fraction: of the completed sends, those the kernel copied after all.
pub(crate) fn copied_fraction(c: &CompletionCounts) -> Metric {
    Metric::from_result(
        "zerocopy_copied_fraction",
        Role::System,
        "fraction",
        Source::Tool,
        c.not_copied_fraction()
            .map(|f| 1.0 - f)
            .ok_or_else(|| "no completion arrived".to_string()),
    )
}

/// A completion id no send call took is a bookkeeping fault worth a warning.
pub(crate) fn warn_unexpected_completions(obs: &mut Observation, c: &CompletionCounts) {
    if c.unexpected > 0 {
        obs.warn(
            WarningKind::Anomaly,
            format!("{} zero-copy completion ids did not match any send call", c.unexpected),
        );
    }
}

/// Warn when neither side, or only one, was pinned (`--client-cpus`, `--server-cpus`).
pub(crate) fn warn_unpinned(obs: &mut Observation, client_pinned: bool, server_pinned: bool) {
    match (client_pinned, server_pinned) {
        (false, false) => obs.warn(
            WarningKind::Unpinned,
            "threads were not pinned: where the scheduler put them can change results several-fold; use --client-cpus and --server-cpus",
        ),
        (false, true) | (true, false) => obs.warn(
            WarningKind::Unpinned,
            "only one side was pinned; the other ran where the scheduler put it",
        ),
        (true, true) => {}
    }
}

/// [`warn_unpinned`], and a warning when any thread in `obs.placement` migrated between CPUs
/// inside the window.
pub(crate) fn warn_placement(obs: &mut Observation, client_pinned: bool, server_pinned: bool) {
    warn_unpinned(obs, client_pinned, server_pinned);
    let moved = obs
        .placement
        .iter()
        .filter(|p| p.migrations.is_some_and(|m| m > 0))
        .count();
    if moved > 0 {
        obs.warn(
            WarningKind::Migrated,
            format!("{moved} threads migrated between CPUs during the window"),
        );
    }
}

/// The `--verify` counts of one role: messages checked intact and messages found corrupt.
pub(crate) fn push_verify_counts(obs: &mut Observation, role: crate::observation::Role, verified: u64, corrupt: u64) {
    obs.push(Metric::tool("verified_messages", role, verified as f64, "messages"));
    obs.push(Metric::tool("corrupt_messages", role, corrupt as f64, "messages"));
}

/// A remote server's warnings, which come as text over the control connection.
pub(crate) fn relay_server_warnings(obs: &mut Observation, warnings: &[String]) {
    for w in warnings {
        obs.warn(WarningKind::Other, w.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::ThreadPlacement;

    fn placement(migrations: Option<u64>) -> ThreadPlacement {
        ThreadPlacement {
            role: Role::Client,
            index: 0,
            pinned: None,
            cpu_at_start: None,
            cpu_at_end: None,
            migrations,
        }
    }

    #[test]
    fn pinning_both_sides_leaves_no_placement_warning_and_migrations_are_counted() {
        let mut obs = Observation::default();
        warn_placement(&mut obs, true, true);
        assert!(obs.warnings.is_empty());
        obs.placement = vec![
            placement(Some(2)),
            placement(Some(0)),
            placement(None),
            placement(Some(1)),
        ];
        warn_placement(&mut obs, true, false);
        assert!(obs.has_warning(WarningKind::Unpinned));
        let migrated: Vec<_> = obs
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::Migrated)
            .collect();
        assert_eq!(migrated.len(), 1);
        assert!(
            migrated[0].text.starts_with("2 threads migrated"),
            "{}",
            migrated[0].text
        );
    }

    #[test]
    fn a_failed_thread_ends_the_wait_early() {
        let stop = Stop::never();
        let failed = AtomicBool::new(true);
        let start = std::time::Instant::now();
        assert!(!stop.sleep_watching(Duration::from_secs(5), &failed));
        // Well under the 5 s it would sleep, with room for a loaded machine's wake-up delay.
        assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
        assert!(stop.sleep_watching(Duration::from_millis(1), &AtomicBool::new(false)));
    }
}
