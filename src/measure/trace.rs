//! The kernel's own evidence without a PMU, source `trace`: a few tracepoints sampled on
//! every CPU over the measured window (`sys/tracepoint.rs`), their fields read at the
//! offsets each event's tracefs `format` file gives, summed per thread while the window is
//! open and, at its close, over the window's own threads (those whose `View` opened on it)
//! for the role the probe was made for:
//! receive copies to user space (`skb:skb_copy_datagram_iovec`, calls and `len`), the send
//! path (`tcp:tcp_sendmsg_locked` calls, `sock:sock_send_length` bytes), softirq time per
//! vector (`irq:softirq_entry/exit`, charged to the thread the softirq interrupted), context
//! switches by cause, time off CPU and, per thread, wakeups (`sched:sched_switch`: a thread
//! switched onto a CPU after leaving it asleep was woken), the machine's wakeups (the counts of
//! `sched:sched_wakeup` and `sched_wakeup_new`: the kernel hands their samples to the woken
//! task's own events, so a CPU-wide sampler gets few of them — 1,152 of 25,747 in a 2 s
//! stream here), and the share of the role's time on CPU its threads spent in the NET softirqs
//! (`softirq_share`).

use crate::measure::window::{Probe, SystemProbes};
use crate::observation::{names, Metric, Role, Source};
use crate::sys::tracepoint::{self, TraceRings, TraceSample};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The environment variable that turns the probe on (`IOPATH_TRACE=on`; `off`, or unset, leaves
/// it off).
pub const TRACE_ENV: &str = "IOPATH_TRACE";
/// Why the probe is off unless asked for: it writes a sample for every event of its tracepoints
/// from inside the measured threads, which at high event rates costs more than the figure it
/// would sit beside (docs/methodology.md, "What it costs").
pub const OFF_BY_DEFAULT: &str = "trace probe off by default (its samples cost up to half the throughput of a fast stream; IOPATH_TRACE=on turns it on)";
/// Ring bytes per CPU; drained every [`DRAIN_EVERY`], so it holds seconds of the busiest stream should the drainer wait for a CPU.
const RING_BYTES: usize = 8 << 20;
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// Samples younger than this stay for the next drain: another CPU's earlier event may not be
/// in its ring yet, and switches must be paired in time order.
const SETTLE_NS: u64 = 2_000_000;

/// The share of a tracepoint's counted events whose samples may be missing for its figures
/// to stand (the figure is short by at most that share of its events).
const MISSED_SAMPLES_MAX: f64 = 0.01;

const NET_TX_SOFTIRQ: u64 = 2;
const NET_RX_SOFTIRQ: u64 = 3;

/// The tracepoints, in the order their ids are opened.
const EVENTS: [(&str, &str); 8] = [
    ("skb", "skb_copy_datagram_iovec"),
    ("tcp", "tcp_sendmsg_locked"),
    ("sock", "sock_send_length"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
    ("sched", "sched_switch"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_wakeup_new"),
];

/// One field of a tracepoint's record: where it is and how wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

impl Field {
    /// The field's value in `raw` (little- or big-endian as the machine), sign-extended.
    pub fn read(&self, raw: &[u8]) -> Option<i64> {
        let bytes = raw.get(self.offset..self.offset + self.size)?;
        let mut buf = [0u8; 8];
        Some(match self.size {
            1 => {
                if self.signed {
                    bytes[0] as i8 as i64
                } else {
                    bytes[0] as i64
                }
            }
            2 => {
                let v = u16::from_ne_bytes([bytes[0], bytes[1]]);
                if self.signed {
                    v as i16 as i64
                } else {
                    v as i64
                }
            }
            4 => {
                let v = u32::from_ne_bytes(bytes.try_into().ok()?);
                if self.signed {
                    v as i32 as i64
                } else {
                    v as i64
                }
            }
            8 => {
                buf.copy_from_slice(bytes);
                i64::from_ne_bytes(buf)
            }
            _ => return None,
        })
    }
}

/// An event's fields by name, from its tracefs `format` text
/// (`field:int len;\toffset:16;\tsize:4;\tsigned:1;`).
pub fn parse_format(text: &str) -> HashMap<String, Field> {
    let mut fields = HashMap::new();
    for line in text.lines() {
        let mut name = None;
        let (mut offset, mut size, mut signed) = (None, None, false);
        for part in line.split(';').map(str::trim) {
            if let Some(decl) = part.strip_prefix("field:") {
                // The name is the declaration's last word, without an array suffix.
                name = decl
                    .split_whitespace()
                    .last()
                    .map(|n| n.split('[').next().unwrap_or(n).to_string());
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("signed:") {
                signed = v == "1";
            }
        }
        if let (Some(n), Some(offset), Some(size)) = (name, offset, size) {
            fields.insert(n, Field { offset, size, signed });
        }
    }
    fields
}

/// What the probe reads of each event: its id and the fields it needs.
#[derive(Debug, Clone)]
struct Layout {
    ids: Vec<u64>,
    common_type: Field,
    copy_len: Field,
    send_ret: Field,
    softirq_vec: Field,
    prev_pid: Field,
    prev_state: Field,
    next_pid: Field,
}

fn read_layout(root: &std::path::Path) -> Result<Layout, String> {
    let mut ids = Vec::new();
    let mut formats = Vec::new();
    for (sys, name) in EVENTS {
        let dir = root.join("events").join(sys).join(name);
        let id = std::fs::read_to_string(dir.join("id"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| format!("no tracepoint {sys}:{name} in this kernel"))?;
        let format = std::fs::read_to_string(dir.join("format")).map_err(|e| format!("{sys}:{name} format: {e}"))?;
        ids.push(id);
        formats.push(parse_format(&format));
    }
    let field = |event: usize, name: &str| {
        let (sys, event_name) = EVENTS[event];
        let f = formats[event]
            .get(name)
            .copied()
            .ok_or_else(|| format!("{sys}:{event_name} has no field {name}"))?;
        // A sample keeps the record's first RAW_KEPT bytes.
        if f.offset + f.size > tracepoint::RAW_KEPT {
            return Err(format!(
                "{sys}:{event_name}'s field {name} lies past the bytes a sample keeps"
            ));
        }
        Ok(f)
    };
    Ok(Layout {
        common_type: field(0, "common_type")?,
        copy_len: field(0, "len")?,
        send_ret: field(2, "ret")?,
        softirq_vec: field(3, "vec")?,
        prev_pid: field(5, "prev_pid")?,
        prev_state: field(5, "prev_state")?,
        next_pid: field(5, "next_pid")?,
        ids,
    })
}

/// What one thread did in the window, as the tracepoints saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadTrace {
    pub copy_calls: u64,
    pub copy_bytes: u64,
    pub sendmsg_calls: u64,
    pub send_bytes: u64,
    pub softirq_rx_ns: u64,
    pub softirq_tx_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub off_cpu_ns: u64,
    pub wakeups: u64,
}

impl ThreadTrace {
    fn add(&mut self, o: &ThreadTrace) {
        self.copy_calls += o.copy_calls;
        self.copy_bytes += o.copy_bytes;
        self.sendmsg_calls += o.sendmsg_calls;
        self.send_bytes += o.send_bytes;
        self.softirq_rx_ns += o.softirq_rx_ns;
        self.softirq_tx_ns += o.softirq_tx_ns;
        self.voluntary += o.voluntary;
        self.involuntary += o.involuntary;
        self.off_cpu_ns += o.off_cpu_ns;
        self.wakeups += o.wakeups;
    }
}

/// The window's samples folded per thread, in time order.
#[derive(Debug, Default)]
struct Tally {
    open_ns: u64,
    threads: HashMap<u32, ThreadTrace>,
    /// Per CPU: the softirq running now (vector, started, interrupted thread).
    in_softirq: HashMap<u32, (u64, u64, u32)>,
    /// Threads off CPU now, since when.
    off_since: HashMap<u32, u64>,
    /// Threads that left their CPU asleep (a voluntary switch) and have not run since: the next
    /// switch onto a CPU is their wakeup.
    asleep: std::collections::HashSet<u32>,
    /// Threads seen switching in or out (one first seen switching in was off CPU since the open).
    seen: std::collections::HashSet<u32>,
    /// Softirq time of all CPUs per vector (NET_RX, NET_TX).
    all_rx_ns: u64,
    all_tx_ns: u64,
    /// The same per CPU: (NET_RX, NET_TX) ns, in CPU order.
    per_cpu_ns: std::collections::BTreeMap<u32, (u64, u64)>,
    lost: u64,
    /// Samples delivered per tracepoint (checked against the events' own counts).
    delivered: Vec<u64>,
}

impl Tally {
    /// Count newly drained samples by tracepoint.
    fn note_delivered(&mut self, layout: &Layout, new: &[TraceSample]) {
        self.delivered.resize(layout.ids.len(), 0);
        for s in new {
            let ty = layout.common_type.read(s.raw()).unwrap_or(-1);
            if let Some(i) = layout.ids.iter().position(|&id| id as i64 == ty) {
                self.delivered[i] += 1;
            }
        }
    }

    fn fold(&mut self, layout: &Layout, s: &TraceSample) {
        let Some(ty) = layout.common_type.read(s.raw()) else {
            return;
        };
        let event = layout.ids.iter().position(|&id| id == ty as u64);
        let get = |f: &Field| f.read(s.raw()).unwrap_or(0);
        match event {
            Some(0) => {
                let t = self.threads.entry(s.tid).or_default();
                t.copy_calls += 1;
                t.copy_bytes += get(&layout.copy_len).max(0) as u64;
            }
            Some(1) => self.threads.entry(s.tid).or_default().sendmsg_calls += 1,
            Some(2) => self.threads.entry(s.tid).or_default().send_bytes += get(&layout.send_ret).max(0) as u64,
            Some(3) => {
                self.in_softirq
                    .insert(s.cpu, (get(&layout.softirq_vec) as u64, s.time_ns, s.tid));
            }
            Some(4) => {
                if let Some((vec, start, tid)) = self.in_softirq.remove(&s.cpu) {
                    let ns = s.time_ns.saturating_sub(start);
                    let t = self.threads.entry(tid).or_default();
                    match vec {
                        NET_RX_SOFTIRQ => {
                            t.softirq_rx_ns += ns;
                            self.all_rx_ns += ns;
                            self.per_cpu_ns.entry(s.cpu).or_default().0 += ns;
                        }
                        NET_TX_SOFTIRQ => {
                            t.softirq_tx_ns += ns;
                            self.all_tx_ns += ns;
                            self.per_cpu_ns.entry(s.cpu).or_default().1 += ns;
                        }
                        _ => {}
                    }
                }
            }
            Some(5) => {
                let prev = get(&layout.prev_pid) as u32;
                let next = get(&layout.next_pid) as u32;
                // A task leaving in a sleeping state (any TASK_REPORT bit: S, D, ...) gave the CPU
                // up; running (0) or preempted (TASK_REPORT_MAX, above those bits) was taken off.
                let voluntary = get(&layout.prev_state) & 0xff != 0;
                if prev != 0 {
                    let t = self.threads.entry(prev).or_default();
                    if voluntary {
                        t.voluntary += 1;
                        self.asleep.insert(prev);
                    } else {
                        t.involuntary += 1;
                    }
                    self.off_since.insert(prev, s.time_ns);
                    self.seen.insert(prev);
                }
                if next != 0 {
                    if self.asleep.remove(&next) {
                        self.threads.entry(next).or_default().wakeups += 1;
                    }
                    let since = match self.off_since.remove(&next) {
                        Some(t) => Some(t),
                        None if self.seen.insert(next) => Some(self.open_ns),
                        None => None,
                    };
                    if let Some(since) = since {
                        self.threads.entry(next).or_default().off_cpu_ns += s.time_ns.saturating_sub(since);
                    }
                }
            }
            _ => {}
        }
    }

    /// The window closed at `close_ns`: threads still off CPU were off until then.
    fn finish(&mut self, close_ns: u64) {
        for (tid, since) in self.off_since.drain() {
            self.threads.entry(tid).or_default().off_cpu_ns += close_ns.saturating_sub(since);
        }
    }
}

/// Sorted samples, folded up to a horizon; what is younger waits for the next drain.
fn fold_until(tally: &mut Tally, layout: &Layout, pending: &mut Vec<TraceSample>, horizon: u64) {
    pending.sort_by_key(|s| s.time_ns);
    let ready = pending.partition_point(|s| s.time_ns <= horizon);
    for s in pending.drain(..ready) {
        tally.fold(layout, &s);
    }
}

struct Running {
    stop: Arc<AtomicBool>,
    drainer: JoinHandle<(TraceRings, Tally, Vec<TraceSample>)>,
}

/// Whether the transport's receive copies pass `skb:skb_copy_datagram_iovec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxCopies {
    /// TCP: every copy to user space goes through skb_copy_datagram_iter, which traces it.
    Traced,
    /// Not seen, and why (the receive-copy figures are unavailable with it).
    Untraced(&'static str),
}

/// UDP copies a linear datagram with copy_linear_skb (net/ipv4/udp.c), past the tracepoint.
pub const UDP_RX_COPIES: RxCopies = RxCopies::Untraced(
    "UDP copies linear datagrams with copy_linear_skb, which skb:skb_copy_datagram_iovec does not see",
);

/// The probe of one window and role.
pub struct TraceProbe {
    role: Role,
    rx_copies: RxCopies,
    /// Also report the system-wide softirq time (one probe per process does, the client's).
    system: bool,
    setup: Result<Layout, String>,
    threads: Arc<Mutex<Vec<u32>>>,
    running: Option<Running>,
    failed: Option<String>,
}

/// The reason the probe is off, if it is (perf off for the run or the pass, IOPATH_TRACE=off,
/// or not asked for).
fn off_reason(perf: bool) -> Option<String> {
    if !perf {
        return Some(crate::measure::counters::PERF_OFF.to_string());
    }
    match std::env::var(TRACE_ENV) {
        Ok(v) if v == "on" || v == "1" => None,
        Ok(v) if v == "off" || v == "0" => Some(format!("trace probe off ({TRACE_ENV}={v})")),
        _ => Some(OFF_BY_DEFAULT.to_string()),
    }
}

/// Why tracepoints cannot be read here, or their layout.
fn setup() -> Result<Layout, String> {
    tracepoint::ensure_tracefs().map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "not root: tracefs ({}) is not readable and cannot be mounted (tracepoints need root or CAP_PERFMON)",
            tracepoint::TRACEFS
        ),
        _ => format!("no tracefs at {} ({e})", tracepoint::TRACEFS),
    })?;
    read_layout(std::path::Path::new(tracepoint::TRACEFS))
}

/// Add the trace probe for `role` (only when the run counts: `perf`; its figures say why not).
pub fn push_trace_probe(system: &mut SystemProbes, role: Role, perf: bool, rx_copies: RxCopies) {
    let setup = match off_reason(perf) {
        Some(why) => Err(why),
        None => setup(),
    };
    system.push(Box::new(TraceProbe {
        role,
        rx_copies,
        system: role == Role::Client,
        setup,
        threads: Arc::default(),
        running: None,
        failed: None,
    }));
}

fn online_cpus() -> Vec<usize> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    // "0-3,6": ranges and single CPUs.
    let mut list = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            list.extend(a..=b);
        }
    }
    if list.is_empty() {
        (0..n).collect()
    } else {
        list
    }
}

fn open_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "system-wide tracepoints need root or CAP_PERFMON (perf_event_paranoid={})",
            crate::sys::procfs::read_i64("/proc/sys/kernel/perf_event_paranoid").map_or("?".into(), |p| p.to_string())
        ),
        _ => format!("perf_event_open of the tracepoints failed: {e}"),
    }
}

impl Probe for TraceProbe {
    type Sample = Vec<Metric>;

    fn threads(&mut self, threads: Arc<Mutex<Vec<u32>>>) {
        self.threads = threads;
    }

    fn open(&mut self) {
        let Ok(layout) = self.setup.clone() else { return };
        let mut rings = match TraceRings::open(&layout.ids, &online_cpus(), RING_BYTES) {
            Ok(r) => r,
            Err(e) => {
                self.failed = Some(open_reason(&e));
                return;
            }
        };
        let mut tally = Tally {
            open_ns: tracepoint::monotonic_ns(),
            ..Tally::default()
        };
        if let Err(e) = rings.enable() {
            self.failed = Some(open_reason(&e));
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let drainer = std::thread::Builder::new().name("iopath-trace".into()).spawn(move || {
            let mut pending = Vec::new();
            while !stopped.load(Ordering::SeqCst) {
                std::thread::sleep(DRAIN_EVERY);
                let horizon = tracepoint::monotonic_ns().saturating_sub(SETTLE_NS);
                let from = pending.len();
                tally.lost += rings.drain(&mut pending);
                tally.note_delivered(&layout, &pending[from..]);
                fold_until(&mut tally, &layout, &mut pending, horizon);
            }
            (rings, tally, pending)
        });
        match drainer {
            Ok(drainer) => self.running = Some(Running { stop, drainer }),
            Err(e) => self.failed = Some(format!("could not start the trace drain thread: {e}")),
        }
    }

    fn close(&mut self) -> Vec<Metric> {
        let why = match (&self.setup, &self.failed, self.running.take()) {
            (Err(why), _, _) | (_, Some(why), _) => why.clone(),
            (Ok(layout), None, Some(run)) => {
                let close_ns = tracepoint::monotonic_ns();
                run.stop.store(true, Ordering::SeqCst);
                match run.drainer.join() {
                    Ok((mut rings, mut tally, mut pending)) => {
                        rings.disable();
                        let from = pending.len();
                        tally.lost += rings.drain(&mut pending);
                        tally.note_delivered(layout, &pending[from..]);
                        let counted = rings
                            .counts()
                            .map_err(|e| format!("reading the tracepoints' counts: {e}"));
                        pending.retain(|s| s.time_ns <= close_ns);
                        fold_until(&mut tally, layout, &mut pending, u64::MAX);
                        tally.finish(close_ns);
                        match counted {
                            Ok(counted) if tally.lost == 0 => {
                                let tids = self.threads.lock().map(|t| t.clone()).unwrap_or_default();
                                let window_ns = close_ns.saturating_sub(tally.open_ns);
                                return self.metrics(&tally, &tids, &counted, window_ns);
                            }
                            Ok(_) => format!("the trace rings lost {} events (the drain fell behind)", tally.lost),
                            Err(why) => why,
                        }
                    }
                    Err(_) => "the trace drain thread panicked".to_string(),
                }
            }
            (Ok(_), None, None) => "the window never opened".to_string(),
        };
        METRICS
            .iter()
            .map(|(name, unit)| Metric::unavailable(name, self.role, unit, &why))
            .chain(
                SYSTEM_METRICS
                    .iter()
                    .filter(|_| self.system)
                    .map(|(name, unit)| Metric::unavailable(name, Role::System, unit, &why)),
            )
            .collect()
    }
}

/// A probe dropped with its window open (a failure between the edges) still joins its thread.
impl Drop for TraceProbe {
    fn drop(&mut self) {
        if let Some(run) = self.running.take() {
            run.stop.store(true, Ordering::SeqCst);
            let _ = run.drainer.join();
        }
    }
}

/// The per-role metrics (name, unit), in the order they are reported, and the tracepoints
/// (indices into [`EVENTS`]) each is read from.
const METRICS: [(&str, &str); 11] = [
    (names::KERNEL_RX_COPY_CALLS, "calls"),
    (names::KERNEL_RX_COPY_BYTES, "B"),
    (names::KERNEL_TX_SENDMSG_CALLS, "calls"),
    (names::KERNEL_TX_BYTES, "B"),
    (names::SOFTIRQ_NET_RX_S, "s"),
    (names::SOFTIRQ_NET_TX_S, "s"),
    (names::SCHED_SWITCHES_VOLUNTARY, "switches"),
    (names::SCHED_SWITCHES_INVOLUNTARY, "switches"),
    (names::OFF_CPU_S, "s"),
    (names::SCHED_WAKEUPS, "wakeups"),
    (names::SOFTIRQ_SHARE, "fraction"),
];
const METRIC_EVENTS: [&[usize]; 11] = [
    &[0],
    &[0],
    &[1],
    &[2],
    &[3, 4],
    &[3, 4],
    &[5],
    &[5],
    &[5],
    &[5],
    &[3, 4, 5],
];
const SYSTEM_METRICS: [(&str, &str); 3] = [
    (names::SOFTIRQ_NET_RX_S, "s"),
    (names::SOFTIRQ_NET_TX_S, "s"),
    (names::SCHED_WAKEUPS, "wakeups"),
];

impl TraceProbe {
    fn metrics(&self, tally: &Tally, tids: &[u32], counted: &[u64], window_ns: u64) -> Vec<Metric> {
        // A figure stands only when the kernel wrote a sample for (nearly) every event it
        // counted: it drops a few when a tracepoint fires inside its own perf output.
        let short = |events: &[usize]| -> Option<String> {
            events.iter().find_map(|&i| {
                let delivered = tally.delivered.get(i).copied().unwrap_or(0);
                let total = counted.get(i).copied().unwrap_or(0);
                (total.saturating_sub(delivered) as f64 > total as f64 * MISSED_SAMPLES_MAX).then(|| {
                    format!(
                        "the kernel wrote {delivered} samples of {} {}:{} events",
                        total, EVENTS[i].0, EVENTS[i].1
                    )
                })
            })
        };
        let mut sum = ThreadTrace::default();
        for tid in tids {
            if let Some(t) = tally.threads.get(tid) {
                sum.add(t);
            }
        }
        let s = |ns: u64| ns as f64 / 1e9;
        let share = softirq_share(&tally.threads, tids, window_ns);
        let values = [
            sum.copy_calls as f64,
            sum.copy_bytes as f64,
            sum.sendmsg_calls as f64,
            sum.send_bytes as f64,
            s(sum.softirq_rx_ns),
            s(sum.softirq_tx_ns),
            sum.voluntary as f64,
            sum.involuntary as f64,
            s(sum.off_cpu_ns),
            sum.wakeups as f64,
            share.unwrap_or(0.0),
        ];
        let mut out: Vec<Metric> = METRICS
            .iter()
            .zip(values)
            .zip(METRIC_EVENTS)
            .map(|(((name, unit), v), events)| match (short(events), self.rx_copies) {
                (_, RxCopies::Untraced(why)) if events == [0] => Metric::unavailable(name, self.role, unit, why),
                (None, _) if *name == names::SOFTIRQ_SHARE && share.is_none() => Metric::unavailable(
                    name,
                    self.role,
                    unit,
                    "the role's threads were never on a CPU in the window",
                ),
                (None, _) => Metric::new(name, self.role, v, unit, Source::Trace),
                (Some(why), _) => Metric::unavailable(name, self.role, unit, why),
            })
            .collect();
        if self.system {
            let softirq = short(&[3, 4]);
            let system = |name: &str, value: f64, unit: &str| match &softirq {
                None => Metric::new(name, Role::System, value, unit, Source::Trace),
                Some(why) => Metric::unavailable(name, Role::System, unit, why.clone()),
            };
            out.push(system(names::SOFTIRQ_NET_RX_S, s(tally.all_rx_ns), "s"));
            out.push(system(names::SOFTIRQ_NET_TX_S, s(tally.all_tx_ns), "s"));
            // Per CPU that ran any: where the network stack's time went (the pinned CPUs of
            // a client and a server, or the CPU the NIC's interrupts land on).
            for (cpu, (rx, tx)) in &tally.per_cpu_ns {
                out.push(system(&names::per_cpu(names::SOFTIRQ_NET_RX_S, *cpu), s(*rx), "s"));
                out.push(system(&names::per_cpu(names::SOFTIRQ_NET_TX_S, *cpu), s(*tx), "s"));
            }
            // Counted, every CPU: the events' own counts, not their samples.
            let wakeups = counted.get(6).copied().unwrap_or(0) + counted.get(7).copied().unwrap_or(0);
            out.push(Metric::new(
                names::SCHED_WAKEUPS,
                Role::System,
                wakeups as f64,
                "wakeups",
                Source::Trace,
            ));
        }
        out
    }
}

/// `softirq_share` of the threads `tids`: their NET_RX + NET_TX softirq time over their time on
/// CPU, each thread's the window less its time off CPU (a thread never seen switching was on
/// the whole window). A softirq is charged to the thread it interrupted, inside that thread's
/// time on CPU, so the share lies in [0, 1]; None when the threads were never on a CPU.
fn softirq_share(threads: &HashMap<u32, ThreadTrace>, tids: &[u32], window_ns: u64) -> Option<f64> {
    let (mut softirq, mut on_cpu) = (0u64, 0u64);
    for tid in tids {
        let t = threads.get(tid).cloned().unwrap_or_default();
        softirq += t.softirq_rx_ns + t.softirq_tx_ns;
        on_cpu += window_ns.saturating_sub(t.off_cpu_ns);
    }
    (on_cpu > 0).then(|| (softirq as f64 / on_cpu as f64).min(1.0))
}

/// `kernel_copy_bytes_per_byte` for the client, the server and both (`system`): the kernel's
/// receive copies to user space per payload byte of the workload (the DRAM figure's
/// denominator); unavailable with the reason when either side is.
pub fn copies_per_payload_byte(metrics: &[Metric], payload: &Result<f64, String>) -> Vec<Metric> {
    let copied = |role: Role| -> Result<f64, String> {
        let m = metrics
            .iter()
            .find(|m| m.name == names::KERNEL_RX_COPY_BYTES && m.role == role)
            .ok_or_else(|| format!("no {} {} figure", role.as_str(), names::KERNEL_RX_COPY_BYTES))?;
        m.value.ok_or_else(|| match &m.source {
            Source::Unavailable(why) => why.clone(),
            other => format!("no value ({other})"),
        })
    };
    let ratio = |bytes: Result<f64, String>| -> Result<f64, String> {
        let payload = payload.clone()?;
        if payload <= 0.0 {
            return Err("no payload moved".to_string());
        }
        Ok(bytes? / payload)
    };
    let client = copied(Role::Client);
    let server = copied(Role::Server);
    let both = match (&client, &server) {
        (Ok(c), Ok(s)) => Ok(c + s),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    [(Role::Client, client), (Role::Server, server), (Role::System, both)]
        .into_iter()
        .map(|(role, bytes)| {
            Metric::from_result(
                names::KERNEL_COPY_BYTES_PER_BYTE,
                role,
                "B/B",
                Source::Trace,
                ratio(bytes),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH_FORMAT: &str = "name: sched_switch\nID: 372\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\n\
print fmt: \"prev_comm=%s\", REC->prev_comm\n";

    #[test]
    fn a_format_file_gives_each_fields_place() {
        let f = parse_format(SWITCH_FORMAT);
        assert_eq!(
            f["prev_comm"],
            Field {
                offset: 8,
                size: 16,
                signed: false
            }
        );
        assert_eq!(
            f["prev_state"],
            Field {
                offset: 32,
                size: 8,
                signed: true
            }
        );
        assert_eq!(
            f["common_type"],
            Field {
                offset: 0,
                size: 2,
                signed: false
            }
        );
        assert!(!f.contains_key("print fmt"));
        let mut raw = vec![0u8; 64];
        raw[32..40].copy_from_slice(&(-3i64).to_ne_bytes());
        raw[24..28].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(f["prev_state"].read(&raw), Some(-3));
        assert_eq!(f["prev_pid"].read(&raw), Some(-1));
        assert_eq!(
            f["next_pid"].read(&raw[..58]),
            None,
            "a field past the record is not read"
        );
    }

    fn layout() -> Layout {
        let f = |offset, size| Field {
            offset,
            size,
            signed: false,
        };
        Layout {
            ids: (1..=8).collect(),
            common_type: f(0, 2),
            copy_len: f(8, 4),
            send_ret: f(8, 4),
            softirq_vec: f(8, 4),
            prev_pid: f(8, 4),
            prev_state: f(16, 8),
            next_pid: f(12, 4),
        }
    }

    fn sample(ty: u16, tid: u32, time_ns: u64, cpu: u32, a: u32, b: u32, c: u64) -> TraceSample {
        let mut raw = vec![0u8; 24];
        raw[0..2].copy_from_slice(&ty.to_ne_bytes());
        raw[8..12].copy_from_slice(&a.to_ne_bytes());
        raw[12..16].copy_from_slice(&b.to_ne_bytes());
        raw[16..24].copy_from_slice(&c.to_ne_bytes());
        TraceSample::new(tid, time_ns, cpu, &raw)
    }

    #[test]
    fn samples_fold_into_per_thread_copies_softirq_and_waits() {
        let layout = layout();
        let mut tally = Tally {
            open_ns: 100,
            ..Tally::default()
        };
        let mut pending = vec![
            sample(1, 10, 110, 0, 65536, 0, 0),
            sample(1, 10, 120, 0, 4096, 0, 0),
            sample(4, 20, 130, 1, NET_RX_SOFTIRQ as u32, 0, 0),
            sample(5, 20, 180, 1, NET_RX_SOFTIRQ as u32, 0, 0),
            // 10 sleeps at 200 (state S), is woken and back at 260; 20 is preempted at 300.
            sample(6, 10, 200, 0, 10, 0, 1),
            sample(7, 30, 250, 1, 10, 0, 0),
            sample(6, 0, 260, 0, 0, 10, 0),
            sample(6, 20, 300, 1, 20, 0, 0x100),
            sample(3, 20, 150, 1, 1000, 0, 0),
        ];
        fold_until(&mut tally, &layout, &mut pending, 1_000);
        tally.finish(400);
        let t10 = &tally.threads[&10];
        assert_eq!((t10.copy_calls, t10.copy_bytes), (2, 69632));
        assert_eq!((t10.voluntary, t10.involuntary, t10.off_cpu_ns), (1, 0, 60));
        let t20 = &tally.threads[&20];
        assert_eq!(
            (t20.softirq_rx_ns, t20.send_bytes, t20.involuntary, t20.off_cpu_ns),
            (50, 1000, 1, 100)
        );
        assert_eq!(tally.all_rx_ns, 50);
        // 10 slept and ran again: one wakeup, its own (not 30's, whose sched_wakeup sample
        // named it); 20 was preempted, not woken.
        assert_eq!((t10.wakeups, tally.threads.get(&30).map_or(0, |t| t.wakeups)), (1, 0));
        assert_eq!(t20.wakeups, 0);
    }

    #[test]
    fn the_softirq_share_is_the_softirq_time_over_the_time_on_cpu() {
        let mut threads = HashMap::new();
        // 10: on CPU 300 of a 400 ns window, 60 of it in NET_RX and 15 in NET_TX softirqs.
        threads.insert(
            10,
            ThreadTrace {
                softirq_rx_ns: 60,
                softirq_tx_ns: 15,
                off_cpu_ns: 100,
                ..ThreadTrace::default()
            },
        );
        assert_eq!(softirq_share(&threads, &[10], 400), Some(0.25));
        // 20 was never seen switching: on CPU the whole window, none of it in softirq.
        assert_eq!(softirq_share(&threads, &[10, 20], 400), Some(75.0 / 700.0));
        // A role that never ran has no share (not 0, which would say its CPU was all its own).
        threads.insert(
            30,
            ThreadTrace {
                off_cpu_ns: 400,
                ..ThreadTrace::default()
            },
        );
        assert_eq!(softirq_share(&threads, &[30], 400), None);
        assert_eq!(softirq_share(&threads, &[], 400), None);
    }

    #[test]
    fn samples_younger_than_the_horizon_wait() {
        let layout = layout();
        let mut tally = Tally::default();
        let mut pending = vec![sample(1, 10, 500, 0, 10, 0, 0), sample(1, 10, 50, 0, 7, 0, 0)];
        fold_until(&mut tally, &layout, &mut pending, 100);
        assert_eq!(tally.threads[&10].copy_bytes, 7);
        assert_eq!(pending.len(), 1);
    }

    #[test]
    fn copies_per_byte_per_role_and_both() {
        let m = vec![
            Metric::new(names::KERNEL_RX_COPY_BYTES, Role::Client, 0.0, "B", Source::Trace),
            Metric::new(names::KERNEL_RX_COPY_BYTES, Role::Server, 1000.0, "B", Source::Trace),
        ];
        let r = copies_per_payload_byte(&m, &Ok(1000.0));
        let v: Vec<_> = r.iter().map(|m| (m.role, m.value)).collect();
        assert_eq!(
            v,
            [
                (Role::Client, Some(0.0)),
                (Role::Server, Some(1.0)),
                (Role::System, Some(1.0))
            ]
        );
        let off = vec![Metric::unavailable(
            names::KERNEL_RX_COPY_BYTES,
            Role::Client,
            "B",
            "no tracefs",
        )];
        let r = copies_per_payload_byte(&off, &Ok(1000.0));
        assert_eq!(r[0].source.to_string(), "unavailable: no tracefs");
        assert!(r.iter().all(|m| m.value.is_none()));
    }
}
