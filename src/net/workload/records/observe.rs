//! What net records observes beyond a network session's common pieces
//! (`net::session::observe`): responses per second and payload throughput from what the
//! client threads received inside their windows, per role CPU, counters and system calls per
//! response, the bytes user space copied, the zero-copy truth of the server's sockets and the
//! cache-resident table. The server side builds its report here (`server_report`), the client
//! side its observation (`client_observation`), with the report merged in.

use super::SideOutcome;
use crate::case::RecordsCase;
use crate::measure::histogram::LatencyHistogram;
use crate::net::completions::CompletionCounts;
use crate::net::control::{ServerReport, ThreadTally};
use crate::net::session::observe::{
    copied_fraction, measured_counters, per, place, push_completion_counts, push_latency, push_server_metrics,
    warn_unexpected_completions,
};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};

/// The latency quantiles a records case reports.
const QUANTILES: [(&str, f64); 4] = [
    (names::LATENCY_P50_US, 0.5),
    (names::LATENCY_P90_US, 0.9),
    (names::LATENCY_P99_US, 0.99),
    (names::LATENCY_P999_US, 0.999),
];

/// Responses received whole (client) or sent (server) inside the window.
pub(super) const RESPONSES: &str = "responses";

/// Why the rates are missing when no client thread measured.
pub(super) const NO_CLIENT_WINDOW: &str = "no client thread saw the measured window";
const NO_SERVER_WINDOW: &str = "no server thread saw the measured window";

fn mean_window<'a>(outcomes: impl IntoIterator<Item = &'a SideOutcome>) -> Option<f64> {
    let seen: Vec<f64> = outcomes.into_iter().filter_map(|o| o.window_s).collect();
    (!seen.is_empty()).then(|| seen.iter().sum::<f64>() / seen.len() as f64)
}

/// One role's figures over its threads that saw the window: counters, CPU and system calls
/// per response, responses and payload bytes, and (server) the bytes user space copied.
fn push_side(obs: &mut Observation, case: &RecordsCase, role: Role, side: &[SideOutcome], tsc_hz: Option<f64>) {
    let why = match role {
        Role::Server => NO_SERVER_WINDOW,
        _ => NO_CLIENT_WINDOW,
    };
    let responses: u64 = side.iter().map(|t| t.responses).sum();
    let syscalls: u64 = side.iter().map(|t| t.syscalls).sum();
    let payload = responses * case.response_bytes();
    let sample = measured_counters(side.iter().map(|t| &t.counters), why);
    let cpu_us_per_response = sample
        .usage
        .as_ref()
        .map(|u| per((u.user + u.system).as_secs_f64() * 1e6, responses as f64))
        .map_err(|e| e.clone());
    obs.metrics
        .extend(sample.metrics(role, payload, responses, "response", tsc_hz));
    obs.push(Metric::from_result(
        names::CPU_US_PER_RESPONSE,
        role,
        "us/response",
        Source::Rusage,
        cpu_us_per_response,
    ));
    obs.push(Metric::new(
        names::SYSCALLS_PER_RESPONSE,
        role,
        per(syscalls as f64, responses as f64),
        "syscalls/response",
        Source::Tool,
    ));
    obs.push(Metric::tool(RESPONSES, role, responses as f64, "responses"));
    obs.push(Metric::tool("payload_bytes", role, payload as f64, "B"));
    if role == Role::Server {
        let copied: u64 = side.iter().map(|t| t.user_copy_bytes).sum();
        obs.push(Metric::new(
            names::USER_COPY_BYTES_PER_PAYLOAD_BYTE,
            role,
            per(copied as f64, payload as f64),
            "B/B",
            Source::Tool,
        ));
    }
}

/// Threads of `role` that moved no response inside the window.
fn warn_idle(obs: &mut Observation, role: Role, idle: usize) {
    if idle > 0 {
        obs.warn(
            WarningKind::Starved,
            format!(
                "{idle} {role} threads moved no response inside the window (starved of CPU?): more threads than CPUs?"
            ),
        );
    }
}

/// The zero-copy truth of the server's sockets: completions, how many the kernel copied.
fn push_zero_copy(obs: &mut Observation, servers: &[SideOutcome]) {
    let mut c = CompletionCounts::default();
    let mut enobufs = 0;
    for (z, e) in servers.iter().filter_map(|s| s.zerocopy.as_ref()) {
        c.add(z);
        enobufs += e;
    }
    push_completion_counts(obs, &c);
    obs.push(copied_fraction(&c));
    obs.push(Metric::tool(
        names::ZEROCOPY_ENOBUFS,
        Role::System,
        enobufs as f64,
        "errors",
    ));
    warn_unexpected_completions(obs, &c);
}

/// The kernel copied zero-copy sends (by the server's `zerocopy_copied_fraction`).
fn warn_copied(obs: &mut Observation) {
    if let Some(copied) = obs
        .value(names::ZEROCOPY_COPIED_FRACTION, Role::System)
        .filter(|f| *f > 0.0)
    {
        obs.warn(WarningKind::ZeroCopyCopied, format!(
            "zero-copy: the kernel copied {:.0}% of sends: local delivery (loopback, veth) copies the pages, so MSG_ZEROCOPY saves no copy here",
            100.0 * copied
        ));
    }
}

/// Random picks from a table the last-level cache nearly holds are often served from the
/// cache: warn, since the case means to measure DRAM.
fn warn_cache_resident(obs: &mut Observation, case: &RecordsCase) {
    if case.pick == crate::case::Pick::Random {
        if let Some(llc) = crate::sys::cache::last_level_bytes().filter(|llc| case.table_bytes < 4 * llc) {
            obs.warn(
                WarningKind::CacheResident,
                format!(
                    "the {} table is less than 4x the {} last-level cache: random records are often served from the cache, not DRAM",
                    crate::format::format_bytes(case.table_bytes),
                    crate::format::format_bytes(llc)
                ),
            );
        }
    }
}

/// The server's side as its report: its role's figures, the zero-copy counts of its sockets,
/// `system` (its window's machine-wide metrics: the memory traffic, and TCP_INFO of its
/// connections), a tally per thread (the client warns of idle ones), placement, and the
/// warnings only it can see (as text).
pub(super) fn server_report(
    case: &RecordsCase,
    threads: Vec<SideOutcome>,
    tsc_hz: Option<f64>,
    system: Vec<Metric>,
) -> ServerReport {
    let mut obs = Observation::default();
    push_side(&mut obs, case, Role::Server, &threads, tsc_hz);
    if case.mode.is_zero_copy() {
        push_zero_copy(&mut obs, &threads);
    }
    obs.metrics.extend(system);
    let tallies = threads
        .iter()
        .map(|t| ThreadTally {
            bytes: t.responses * case.response_bytes(),
            messages: t.responses,
            window_s: t.window_s,
            syscalls: t.syscalls,
        })
        .collect();
    ServerReport {
        threads: tallies,
        metrics: obs.metrics,
        placement: threads.into_iter().map(|t| t.placement).collect(),
        verified_messages: 0,
        corrupt_messages: 0,
        warnings: obs
            .warnings
            .into_iter()
            .map(|w| format!("server: {}", w.text))
            .collect(),
    }
}

/// The client's observation: responses/s and payload throughput from what its threads
/// received inside their windows, latency percentiles, its role's figures, the server's
/// report (its role's figures, the zero-copy truth, its machine's memory traffic), the verify
/// counts, and the warnings.
pub(super) fn client_observation(
    case: &RecordsCase,
    clients: &[SideOutcome],
    server: &ServerReport,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    let response_bytes = case.response_bytes() as f64;
    let window = mean_window(clients).ok_or_else(|| NO_CLIENT_WINDOW.to_string());
    let received: u64 = clients.iter().map(|c| c.responses).sum();
    let rate = window.clone().map(|w| received as f64 / w);
    let tool = |name: &str, unit: &str, value: Result<f64, String>| {
        Metric::from_result(name, Role::System, unit, Source::Tool, value)
    };
    obs.push(tool(names::RESPONSES_PER_S, "responses/s", rate.clone()));
    obs.push(tool(
        names::THROUGHPUT_GBPS,
        "Gbit/s",
        rate.map(|r| r * response_bytes * 8.0 / 1e9),
    ));
    obs.push(tool(names::WINDOW_S, "s", window));

    let mut latency = LatencyHistogram::new();
    for c in clients {
        latency.merge(&c.latency);
    }
    push_latency(&mut obs, &latency, &QUANTILES, "no response arrived inside the window");
    push_side(&mut obs, case, Role::Client, clients, tsc_hz);
    warn_idle(
        &mut obs,
        Role::Client,
        clients.iter().filter(|t| t.responses == 0).count(),
    );
    push_server_metrics(&mut obs, server);
    warn_idle(
        &mut obs,
        Role::Server,
        server.threads.iter().filter(|t| t.messages == 0).count(),
    );
    if case.mode.is_zero_copy() {
        warn_copied(&mut obs);
    }
    if case.net.verify {
        let verified: u64 = clients.iter().map(|c| c.verified_records).sum();
        let corrupt: u64 = clients.iter().map(|c| c.corrupt_records).sum();
        obs.push(Metric::tool(
            "verified_records",
            Role::Client,
            verified as f64,
            "records",
        ));
        obs.push(Metric::tool(
            names::CORRUPT_RECORDS,
            Role::Client,
            corrupt as f64,
            "records",
        ));
        obs.warn(
            WarningKind::VerifyCost,
            "--verify reads and checks every record byte on the client: its CPU and the latency include that work",
        );
        if corrupt > 0 {
            obs.warn(WarningKind::Anomaly, format!("{corrupt} records arrived corrupted"));
        }
    }
    warn_cache_resident(&mut obs, case);
    place(&mut obs, clients.iter().map(|t| t.placement.clone()), server, &case.net);
    obs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Align, NetParams, Pick, RecordsMode};
    use crate::observation::ThreadPlacement;

    fn case() -> RecordsCase {
        RecordsCase {
            mode: RecordsMode::ZeroCopy,
            record_size: 100,
            records: 2,
            table_bytes: 1 << 20,
            pick: Pick::Hot,
            outstanding: 1,
            net: NetParams {
                threads: 2,
                client_cpus: Some("0".parse().unwrap()),
                server_cpus: Some("1".parse().unwrap()),
                ..NetParams::for_test()
            },
            prove_copies: false,
            align: Align::Page,
        }
    }

    fn thread(role: Role, index: usize, responses: u64, zerocopy: Option<CompletionCounts>) -> SideOutcome {
        SideOutcome {
            responses,
            syscalls: 2 * responses,
            user_copy_bytes: 0,
            window_s: Some(0.1),
            counters: None,
            placement: ThreadPlacement {
                role,
                index,
                pinned: None,
                cpu_at_start: None,
                cpu_at_end: None,
                migrations: None,
            },
            latency: LatencyHistogram::new(),
            verified_records: 0,
            corrupt_records: 0,
            zerocopy: zerocopy.map(|c| (c, 0)),
        }
    }

    /// What the server sees only it can count travels in its report as figures and tallies,
    /// so the client's observation gives them their kinds: the copied zero-copy sends and the
    /// idle server thread are typed warnings, not relayed text.
    #[test]
    fn the_servers_report_comes_back_as_typed_figures_and_warnings() {
        let case = case();
        let counts = CompletionCounts {
            sends: 10,
            notifications: 4,
            completed: 10,
            copied: 5,
            unexpected: 0,
        };
        let servers = vec![
            thread(Role::Server, 0, 10, Some(counts)),
            thread(Role::Server, 1, 0, Some(CompletionCounts::default())),
        ];
        let memory = Metric::unavailable(names::DRAM_BYTES, Role::System, "B", "no uncore counters");
        let report = server_report(&case, servers, None, vec![memory]);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert_eq!(report.threads.iter().map(|t| t.messages).collect::<Vec<_>>(), [10, 0]);
        assert_eq!(report.threads[0].bytes, 2000);

        let clients = [thread(Role::Client, 0, 6, None), thread(Role::Client, 1, 4, None)];
        let obs = client_observation(&case, &clients, &report, None);
        assert_eq!(obs.value(RESPONSES, Role::Server), Some(10.0));
        assert_eq!(obs.value(RESPONSES, Role::Client), Some(10.0));
        assert_eq!(obs.value(names::RESPONSES_PER_S, Role::System), Some(100.0));
        assert_eq!(obs.value(names::ZEROCOPY_COPIED_FRACTION, Role::System), Some(0.5));
        assert_eq!(
            obs.value(names::USER_COPY_BYTES_PER_PAYLOAD_BYTE, Role::Server),
            Some(0.0)
        );
        assert!(obs.get(names::DRAM_BYTES, Role::System).is_some());
        let kinds: Vec<_> = obs.warnings.iter().map(|w| (w.kind, w.text.as_str())).collect();
        assert!(
            kinds
                .iter()
                .any(|(k, t)| *k == WarningKind::ZeroCopyCopied && t.contains("copied 50% of sends")),
            "{kinds:?}"
        );
        assert!(
            kinds
                .iter()
                .any(|(k, t)| *k == WarningKind::Starved && t.starts_with("1 server threads")),
            "{kinds:?}"
        );
        assert!(!kinds.iter().any(|(k, _)| *k == WarningKind::Other), "{kinds:?}");
        assert_eq!(obs.placement.len(), 4);
    }
}
