//! The queue evidence of a shaped link: each end's root qdisc (the shaper that holds what the
//! link cannot send yet) read over rtnetlink as the window opens and as it closes — the bytes
//! and packets waiting then, and the packets dropped in between. A standing backlog at the
//! window's close is the queue a loaded round trip waits behind; drops are where TCP learns the
//! link is full. Metrics of source `kernel`, role: the end that sends into that queue.

use crate::measure::window::{Probe, SystemProbes};
use crate::observation::{names, Metric, Role, Source};
use crate::sys::rtnetlink::{QdiscReader, QdiscStats};

/// One end's queue: its reader (or why there is none) and its counters as the window opened.
struct QueueEnd {
    role: Role,
    reader: Result<QdiscReader, String>,
    opened: Option<QdiscStats>,
}

/// The queues of a link's ends, read at the window's edges.
struct LinkQueues(Vec<QueueEnd>);

/// Add the queue probe of a shaped link: `ends` are each end's role and its qdisc reader,
/// opened in that end's namespace (`QdiscReader::open`), or why it could not be.
pub fn push_queue_probe(system: &mut SystemProbes, ends: Vec<(Role, Result<QdiscReader, String>)>) {
    if ends.is_empty() {
        return;
    }
    let ends = ends
        .into_iter()
        .map(|(role, reader)| QueueEnd {
            role,
            reader,
            opened: None,
        })
        .collect();
    system.push(Box::new(LinkQueues(ends)));
}

impl QueueEnd {
    fn read(&self) -> Result<QdiscStats, String> {
        let reader = self.reader.as_ref().map_err(Clone::clone)?;
        reader.read().map_err(|e| format!("cannot read the qdisc: {e}"))
    }

    /// Its metrics from the counters at the window's edges.
    fn metrics(&self, closed: Result<QdiscStats, String>) -> Vec<Metric> {
        let opened = match (&self.opened, &closed) {
            (Some(o), _) => Ok(o.clone()),
            (None, Err(e)) => Err(e.clone()),
            (None, Ok(_)) => Err("the qdisc could not be read as the window opened".to_string()),
        };
        let both = opened.clone().and_then(|o| closed.clone().map(|c| (o, c)));
        let figures: [(&str, &str, Result<f64, String>); 4] = [
            (
                names::QDISC_BACKLOG_OPEN_BYTES,
                "B",
                opened.map(|o| f64::from(o.backlog_bytes)),
            ),
            (
                names::QDISC_BACKLOG_CLOSE_BYTES,
                "B",
                closed.clone().map(|c| f64::from(c.backlog_bytes)),
            ),
            (
                names::QDISC_BACKLOG_CLOSE_PACKETS,
                "packets",
                closed.map(|c| f64::from(c.backlog_packets)),
            ),
            (
                names::QDISC_DROPS,
                "packets",
                both.map(|(o, c)| f64::from(c.drops.wrapping_sub(o.drops))),
            ),
        ];
        figures
            .into_iter()
            .map(|(name, unit, value)| Metric::from_result(name, self.role, unit, Source::Kernel, value))
            .collect()
    }
}

impl Probe for LinkQueues {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        for end in &mut self.0 {
            end.opened = end.read().ok();
        }
    }
    fn close(&mut self) -> Vec<Metric> {
        self.0.iter().flat_map(|end| end.metrics(end.read())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(backlog_bytes: u32, drops: u32) -> QdiscStats {
        QdiscStats {
            kind: "tbf".into(),
            backlog_bytes,
            backlog_packets: backlog_bytes / 1514,
            drops,
            ..QdiscStats::default()
        }
    }

    #[test]
    fn the_window_edges_give_backlogs_and_the_drops_between() {
        let end = QueueEnd {
            role: Role::Server,
            reader: Err("unused".into()),
            opened: Some(stats(0, 7)),
        };
        let metrics = end.metrics(Ok(stats(2_500_000, 19)));
        let value = |name: &str| metrics.iter().find(|m| m.name == name).and_then(|m| m.value);
        assert_eq!(value(names::QDISC_BACKLOG_OPEN_BYTES), Some(0.0));
        assert_eq!(value(names::QDISC_BACKLOG_CLOSE_BYTES), Some(2_500_000.0));
        assert_eq!(value(names::QDISC_BACKLOG_CLOSE_PACKETS), Some(1651.0));
        assert_eq!(value(names::QDISC_DROPS), Some(12.0));
        assert!(metrics
            .iter()
            .all(|m| m.role == Role::Server && m.source == Source::Kernel));
    }

    #[test]
    fn an_unreadable_queue_is_unavailable_with_its_reason() {
        let end = QueueEnd {
            role: Role::Client,
            reader: Err("no such device".into()),
            opened: None,
        };
        let metrics = end.metrics(Err("no such device".into()));
        assert_eq!(metrics.len(), 4);
        assert!(metrics.iter().all(|m| m.value.is_none()));
        assert!(metrics
            .iter()
            .all(|m| matches!(&m.source, Source::Unavailable(r) if r.contains("no such device"))));
    }
}
