//! What the network workloads' clients do alike: drive the warm-up and measured window with
//! a remote server, and warn about where their threads ran.

use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{Control, ControlChannel};
use crate::net::workload::stream::interrupted;
use crate::observation::{Metric, Observation, WarningKind};
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

/// A remote server's warnings, which come as text over the control connection.
pub(crate) fn relay_server_warnings(obs: &mut Observation, warnings: &[String]) {
    for w in warnings {
        obs.warn(WarningKind::Other, w.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::{Role, ThreadPlacement};

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
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(stop.sleep_watching(Duration::from_millis(1), &AtomicBool::new(false)));
    }
}
