//! What the network workloads do alike and the session layer does not: the client driving the
//! warm-up and measured window with a remote server (records). A session server's data port and
//! report are in net/session/data.rs; the observation helpers the workloads share (zero-copy
//! counts, verify counts, placement warnings) in net/session/observe.rs.

use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{Control, ControlChannel};
use crate::net::session::interrupted;
use crate::observation::Metric;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::session::observe::warn_placement;
    use crate::observation::{Observation, Role, ThreadPlacement, WarningKind};

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
