//! The kernel's own evidence without a PMU, source `trace`: small eBPF programs
//! (`trace/program.rs`, instructions built here, no compiler at build time) run in the kernel
//! on every event of a few tracepoints, on every CPU, and add what each event says to a sum
//! per thread of this process and per CPU (`sys/bpf.rs` maps); the probe reads the sums at the
//! window's edges and reports the difference over the window's own threads (those whose
//! `View` opened on it) for the role the probe was made for:
//! receive copies to user space (`skb:skb_copy_datagram_iovec`, calls and `len`), the send
//! path (`tcp:tcp_sendmsg_locked` calls, `sock:sock_send_length` bytes), softirq time per
//! vector (`irq:softirq_entry/exit`, charged to the thread the softirq interrupted), context
//! switches by cause, time off CPU and, per thread, wakeups (`sched:sched_switch`: a thread
//! switched onto a CPU after leaving it asleep was woken), the machine's wakeups (the counts of
//! `sched:sched_wakeup` and `sched_wakeup_new`, plain counting events), and the share of the
//! role's time on CPU its threads spent in the NET softirqs (`softirq_share`). Nothing is
//! written per event but those sums, and no thread of iopath's reads events while the window
//! is open.

mod program;

use crate::measure::window::{Probe, SystemProbes};
use crate::observation::{names, Metric, Role, Source};
use crate::sys::bpf::{Insn, Map, MapKind, Program, ProgramKind};
use crate::sys::tracepoint;
use perf_event::Counter;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

/// The environment variable that turns the probe off (`IOPATH_TRACE=off`; unset, or `on`, leaves
/// it on: its cost is measured in docs/methodology.md, "What it costs").
pub const TRACE_ENV: &str = "IOPATH_TRACE";

/// Entries of the per-thread map: above the threads any run of iopath has at once.
const MAX_THREADS: u32 = 16384;

/// The tracepoints, in the order their ids are read.
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

/// The numbers the copy, send and softirq programs read of their events.
#[derive(Debug, Clone, Copy)]
struct Fields {
    copy_len: Field,
    send_ret: Field,
    softirq_vec: Field,
}

/// Argument `index` of a raw tracepoint, an integer of `size` bytes: each argument fills a
/// u64 of the program's context.
const fn raw_arg(index: usize, size: usize, signed: bool) -> Field {
    let low_half = if cfg!(target_endian = "big") { 8 - size } else { 0 };
    Field {
        offset: 8 * index + low_half,
        size,
        signed,
    }
}

/// The same numbers as raw tracepoint arguments: `skb_copy_datagram_iovec(skb, int len)`,
/// `sock_send_length(sk, int ret, int flags)`, `softirq_entry(unsigned int vec_nr)`.
const RAW_ARGS: Fields = Fields {
    copy_len: raw_arg(1, 4, true),
    send_ret: raw_arg(1, 4, true),
    softirq_vec: raw_arg(0, 4, false),
};

/// What the probe reads of each event: its id and the record fields its programs read.
#[derive(Debug, Clone)]
struct Layout {
    ids: Vec<u64>,
    record: Fields,
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
        // A program reads a field with one aligned load of 1, 2, 4 or 8 bytes.
        if ![1, 2, 4, 8].contains(&f.size) || f.offset % f.size != 0 || f.offset > i16::MAX as usize {
            return Err(format!(
                "{sys}:{event_name}'s field {name} is not a number a probe program can read"
            ));
        }
        Ok(f)
    };
    Ok(Layout {
        record: Fields {
            copy_len: field(0, "len")?,
            send_ret: field(2, "ret")?,
            softirq_vec: field(3, "vec")?,
        },
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

/// One thread's entry of the per-thread map (`program::THREAD_VALUE` bytes of u64), read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct ThreadSums([u64; program::THREAD_VALUE / 8]);

impl ThreadSums {
    fn from_bytes(b: &[u8]) -> ThreadSums {
        let mut v = [0u64; program::THREAD_VALUE / 8];
        for (i, chunk) in b.chunks_exact(8).take(v.len()).enumerate() {
            v[i] = u64::from_ne_bytes(chunk.try_into().unwrap_or([0; 8]));
        }
        ThreadSums(v)
    }

    fn at(&self, offset: i16) -> u64 {
        self.0[offset as usize / 8]
    }
}

/// The maps' sums at one instant: per thread, and per CPU (NET_RX ns, NET_TX ns).
#[derive(Debug, Clone, Default)]
struct Snapshot {
    at_ns: u64,
    threads: HashMap<u32, ThreadSums>,
    cpus: BTreeMap<u32, (u64, u64)>,
}

/// What each thread did between two snapshots. The sums only grow, so the window's part is
/// their difference, except time off CPU, which a thread adds when it comes back: a thread
/// off CPU at the open adds, on its return, the time before the open too (taken off), and one
/// off CPU at the close has not added its current absence yet (added, from the open at most).
fn window_threads(open: &Snapshot, close: &Snapshot) -> HashMap<u32, ThreadTrace> {
    use program::*;
    close
        .threads
        .iter()
        .map(|(&tid, c)| {
            let o = open.threads.get(&tid).copied().unwrap_or_default();
            let d = |off: i16| c.at(off).saturating_sub(o.at(off));
            let (left_before, left_now) = (o.at(OFF_SINCE), c.at(OFF_SINCE));
            let before_open = if left_before != 0 && left_now != left_before {
                open.at_ns.saturating_sub(left_before)
            } else {
                0
            };
            let until_close = if left_now != 0 {
                close.at_ns.saturating_sub(left_now.max(open.at_ns))
            } else {
                0
            };
            let trace = ThreadTrace {
                copy_calls: d(COPY_CALLS),
                copy_bytes: d(COPY_BYTES),
                sendmsg_calls: d(SENDMSG_CALLS),
                send_bytes: d(SEND_BYTES),
                softirq_rx_ns: d(SOFTIRQ_RX_NS),
                softirq_tx_ns: d(SOFTIRQ_TX_NS),
                voluntary: d(VOLUNTARY),
                involuntary: d(INVOLUNTARY),
                off_cpu_ns: (d(OFF_CPU_NS).saturating_sub(before_open) + until_close)
                    .min(close.at_ns.saturating_sub(open.at_ns)),
                wakeups: d(WAKEUPS),
            };
            (tid, trace)
        })
        .collect()
}

/// This process's programs and maps, attached while any probe's window is open: the probes
/// open at once (a local run's client and server) share them, so one set of programs runs per
/// event however many roles this process measures. Dropped with the last probe's window:
/// detached.
struct Kernel {
    threads: Map,
    cpus: Map,
    /// The raw tracepoint attachments, held only to keep them (closed: detached).
    _raw_links: Vec<std::os::fd::OwnedFd>,
    /// The perf events the other programs are attached through, one a tracepoint, held only
    /// to keep them attached (dropped: detached).
    _attachments: Vec<Counter>,
    /// sched_wakeup and sched_wakeup_new counted on each CPU since the attachment.
    wakeups: Mutex<Vec<Counter>>,
}

/// The attached [`Kernel`], while some probe holds it.
static ATTACHED: Mutex<Weak<Kernel>> = Mutex::new(Weak::new());

/// The process's attached programs: the ones some open window holds, or attached now.
fn attached_kernel(layout: &Layout, cpus: &[usize]) -> Result<Arc<Kernel>, String> {
    let mut slot = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kernel) = slot.upgrade() {
        return Ok(kernel);
    }
    let kernel = Arc::new(Kernel::attach(layout, cpus)?);
    *slot = Arc::downgrade(&kernel);
    Ok(kernel)
}

/// One probe's window: the shared programs, and their sums and wakeups at its open.
struct Attached {
    kernel: Arc<Kernel>,
    open: Snapshot,
    wakeups_at_open: u64,
}

impl Attached {
    fn open(layout: &Layout, cpus: &[usize]) -> Result<Attached, String> {
        let kernel = attached_kernel(layout, cpus)?;
        let read = |e: std::io::Error| format!("reading the probe's sums: {e}");
        let wakeups_at_open = kernel.wakeups().map_err(read)?;
        let open = kernel.snapshot().map_err(read)?;
        Ok(Attached {
            kernel,
            open,
            wakeups_at_open,
        })
    }

    /// Its open and close snapshots and the machine's wakeups between (its hold on the
    /// programs is let go: the last one detaches them).
    fn close(self) -> std::io::Result<(Snapshot, Snapshot, u64)> {
        let close = self.kernel.snapshot()?;
        let wakeups = self.kernel.wakeups()?.saturating_sub(self.wakeups_at_open);
        Ok((self.open, close, wakeups))
    }
}

impl Kernel {
    /// Load the programs for `layout`, attach them and count the wakeups on every CPU of `cpus`.
    fn attach(layout: &Layout, cpus: &[usize]) -> Result<Kernel, String> {
        let map = |kind, key, value, entries| {
            Map::create(kind, key, value, entries).map_err(|e| match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => "eBPF maps need root or CAP_BPF (bpf() refused)".to_string(),
                _ => format!("could not make an eBPF map: {e}"),
            })
        };
        let threads = map(MapKind::Hash, 4, program::THREAD_VALUE, MAX_THREADS)?;
        let cpu_entries = cpus.iter().max().map_or(1, |&c| c as u32 + 1);
        let cpu_map = map(MapKind::Array, 4, program::CPU_VALUE, cpu_entries)?;
        let target = program::Target {
            threads: threads.raw_fd(),
            cpus: cpu_map.raw_fd(),
            tgid: std::process::id(),
        };
        let mut raw_links = Vec::new();
        let mut attachments = Vec::new();
        for (event, raw) in programs(target, &RAW_ARGS).iter().enumerate() {
            // A raw tracepoint costs the least (no record is built for it); a kernel without
            // one for this event still has the perf-event way.
            match load_and_attach_raw(event, raw) {
                Ok(link) => raw_links.push(link),
                Err(_) => {
                    let on_record = &programs(target, &layout.record)[event];
                    attachments.push(attach_record(layout, event, on_record, cpus)?);
                }
            }
        }
        // sched_switch's arriving thread is a task pointer among the raw arguments; its
        // record has the pid.
        let switch = program::sched_switch(target, &layout.prev_state, &layout.next_pid);
        attachments.push(attach_record(layout, 5, &switch, cpus)?);
        let mut wakeups = Vec::with_capacity(2 * cpus.len());
        for event in [6, 7] {
            for &cpu in cpus {
                wakeups.push(tracepoint::count_on(layout.ids[event], cpu).map_err(|e| open_reason(&e))?);
            }
        }
        // Only the counters are enabled: a program runs once attached, and its disabled event
        // records nothing of the events it passes on.
        for e in wakeups.iter_mut() {
            e.enable().map_err(|e| open_reason(&e))?;
        }
        // This process's threads asleep now have left their CPU by the open: the programs make
        // an entry for a thread only when it is on a CPU, so without these one asleep since
        // before the open would add neither that absence nor its wakeup.
        let now = tracepoint::monotonic_ns();
        for tid in asleep_threads() {
            let mut sums = ThreadSums::default();
            sums.0[program::OFF_SINCE as usize / 8] = now;
            sums.0[program::ASLEEP as usize / 8] = 1;
            let bytes: Vec<u8> = sums.0.iter().flat_map(|v| v.to_ne_bytes()).collect();
            threads
                .insert_new(&tid.to_ne_bytes(), &bytes)
                .map_err(|e| format!("could not enter a thread in the probe's map: {e}"))?;
        }
        Ok(Kernel {
            threads,
            cpus: cpu_map,
            _raw_links: raw_links,
            _attachments: attachments,
            wakeups: Mutex::new(wakeups),
        })
    }

    /// The machine's wakeups counted since the attachment, every CPU.
    fn wakeups(&self) -> std::io::Result<u64> {
        let mut counters = self.wakeups.lock().unwrap_or_else(|e| e.into_inner());
        let mut sum = 0;
        for c in counters.iter_mut() {
            sum += c.read()?;
        }
        Ok(sum)
    }

    fn snapshot(&self) -> std::io::Result<Snapshot> {
        let at_ns = tracepoint::monotonic_ns();
        let mut snap = Snapshot {
            at_ns,
            ..Snapshot::default()
        };
        for (key, value) in self.threads.entries()? {
            let tid = u32::from_ne_bytes(key[..4].try_into().unwrap_or([0; 4]));
            snap.threads.insert(tid, ThreadSums::from_bytes(&value));
        }
        for (key, value) in self.cpus.entries()? {
            let cpu = u32::from_ne_bytes(key[..4].try_into().unwrap_or([0; 4]));
            let at = |off: i16| u64::from_ne_bytes(value[off as usize..off as usize + 8].try_into().unwrap_or([0; 8]));
            snap.cpus.insert(cpu, (at(program::CPU_RX_NS), at(program::CPU_TX_NS)));
        }
        Ok(snap)
    }
}

/// The programs of the first five events, reading their numbers at `fields`.
fn programs(target: program::Target, fields: &Fields) -> [Vec<Insn>; 5] {
    [
        program::receive_copy(target, &fields.copy_len),
        program::sendmsg_call(target),
        program::send_length(target, &fields.send_ret),
        program::softirq_entry(target, &fields.softirq_vec),
        program::softirq_exit(target),
    ]
}

/// Program `insns` of event `event` loaded as a raw tracepoint program and attached.
fn load_and_attach_raw(event: usize, insns: &[Insn]) -> Result<std::os::fd::OwnedFd, String> {
    let loaded = Program::load(ProgramKind::RawTracepoint, insns)?;
    loaded.attach_raw(EVENTS[event].1).map_err(|e| e.to_string())
}

/// Program `insns` of event `event` loaded as a tracepoint program and attached through a perf
/// event: a tracepoint runs its programs on every CPU (perf_trace_run_bpf_submit), so one
/// attachment, on the first CPU, sees them all.
fn attach_record(layout: &Layout, event: usize, insns: &[Insn], cpus: &[usize]) -> Result<Counter, String> {
    let loaded = Program::load(ProgramKind::Tracepoint, insns)
        .map_err(|e| format!("{}:{}: {e}", EVENTS[event].0, EVENTS[event].1))?;
    let first_cpu = cpus.first().copied().unwrap_or(0);
    loaded.attach(layout.ids[event], first_cpu).map_err(|e| open_reason(&e))
}

/// This process's threads that are asleep (state S or D in /proc/self/task/<tid>/stat).
fn asleep_threads() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // The state follows the command's closing parenthesis.
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            matches!(state, 'S' | 'D').then_some(tid)
        })
        .collect()
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
    attached: Option<Attached>,
    failed: Option<String>,
}

/// The reason the probe is off, if it is (perf off for the run or the pass, or IOPATH_TRACE=off).
fn off_reason(perf: bool) -> Option<String> {
    if !perf {
        return Some(crate::measure::counters::PERF_OFF.to_string());
    }
    match std::env::var(TRACE_ENV) {
        Ok(v) if v == "off" || v == "0" => Some(format!("trace probe off ({TRACE_ENV}={v})")),
        _ => None,
    }
}

/// Why tracepoints cannot be read here, or their layout.
fn setup() -> Result<Layout, String> {
    // Read once a process: every window of every role builds a probe, and the events' ids and
    // fields do not change while the kernel runs.
    static LAYOUT: std::sync::OnceLock<Layout> = std::sync::OnceLock::new();
    if let Some(layout) = LAYOUT.get() {
        return Ok(layout.clone());
    }
    tracepoint::ensure_tracefs().map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "not root: tracefs ({}) is not readable and cannot be mounted (tracepoints need root or CAP_PERFMON)",
            tracepoint::TRACEFS
        ),
        _ => format!("no tracefs at {} ({e})", tracepoint::TRACEFS),
    })?;
    let layout = read_layout(std::path::Path::new(tracepoint::TRACEFS))?;
    Ok(LAYOUT.get_or_init(|| layout).clone())
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
        attached: None,
        failed: None,
    }));
}

fn open_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "system-wide tracepoints need root or CAP_PERFMON (perf_event_paranoid={})",
            crate::sys::procfs::read_i64("/proc/sys/kernel/perf_event_paranoid").map_or("?".into(), |p| p.to_string())
        ),
        _ => format!("attaching the probe to the tracepoints failed: {e}"),
    }
}

impl Probe for TraceProbe {
    type Sample = Vec<Metric>;

    fn threads(&mut self, threads: Arc<Mutex<Vec<u32>>>) {
        self.threads = threads;
    }

    fn open(&mut self) {
        let Ok(layout) = &self.setup else { return };
        match Attached::open(layout, &crate::sys::procfs::online_cpus()) {
            Ok(attached) => self.attached = Some(attached),
            Err(why) => self.failed = Some(why),
        }
    }

    fn close(&mut self) -> Vec<Metric> {
        let why = match (&self.setup, &self.failed, self.attached.take()) {
            (Err(why), _, _) | (_, Some(why), _) => why.clone(),
            (Ok(_), None, Some(attached)) => match attached.close() {
                Ok((open, close, wakeups)) => {
                    let tids = self.threads.lock().map(|t| t.clone()).unwrap_or_default();
                    return self.metrics(&open, &close, &tids, wakeups);
                }
                Err(e) => format!("reading the probe's sums: {e}"),
            },
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
const SYSTEM_METRICS: [(&str, &str); 3] = [
    (names::SOFTIRQ_NET_RX_S, "s"),
    (names::SOFTIRQ_NET_TX_S, "s"),
    (names::SCHED_WAKEUPS, "wakeups"),
];

impl TraceProbe {
    fn metrics(&self, open: &Snapshot, close: &Snapshot, tids: &[u32], wakeups: u64) -> Vec<Metric> {
        let threads = window_threads(open, close);
        let window_ns = close.at_ns.saturating_sub(open.at_ns);
        let mut sum = ThreadTrace::default();
        for tid in tids {
            if let Some(t) = threads.get(tid) {
                sum.add(t);
            }
        }
        let s = |ns: u64| ns as f64 / 1e9;
        let share = softirq_share(&threads, tids, window_ns);
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
            .map(|((name, unit), v)| match self.rx_copies {
                RxCopies::Untraced(why)
                    if *name == names::KERNEL_RX_COPY_CALLS || *name == names::KERNEL_RX_COPY_BYTES =>
                {
                    Metric::unavailable(name, self.role, unit, why)
                }
                _ if *name == names::SOFTIRQ_SHARE && share.is_none() => Metric::unavailable(
                    name,
                    self.role,
                    unit,
                    "the role's threads were never on a CPU in the window",
                ),
                _ => Metric::new(name, self.role, v, unit, Source::Trace),
            })
            .collect();
        if self.system {
            let system =
                |name: &str, value: f64, unit: &str| Metric::new(name, Role::System, value, unit, Source::Trace);
            let cpus: Vec<(u32, (u64, u64))> = close
                .cpus
                .iter()
                .map(|(&cpu, &(rx, tx))| {
                    let (rx0, tx0) = open.cpus.get(&cpu).copied().unwrap_or_default();
                    (cpu, (rx.saturating_sub(rx0), tx.saturating_sub(tx0)))
                })
                .collect();
            let all_rx: u64 = cpus.iter().map(|(_, (rx, _))| rx).sum();
            let all_tx: u64 = cpus.iter().map(|(_, (_, tx))| tx).sum();
            out.push(system(names::SOFTIRQ_NET_RX_S, s(all_rx), "s"));
            out.push(system(names::SOFTIRQ_NET_TX_S, s(all_tx), "s"));
            // Per CPU that ran any: where the network stack's time went (the pinned CPUs of
            // a client and a server, or the CPU the NIC's interrupts land on).
            for (cpu, (rx, tx)) in cpus.iter().filter(|(_, (rx, tx))| rx + tx > 0) {
                out.push(system(&names::per_cpu(names::SOFTIRQ_NET_RX_S, *cpu), s(*rx), "s"));
                out.push(system(&names::per_cpu(names::SOFTIRQ_NET_TX_S, *cpu), s(*tx), "s"));
            }
            out.push(system(names::SCHED_WAKEUPS, wakeups as f64, "wakeups"));
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

    /// The kernel's verifier takes every program both ways: raw (what this kernel runs) and
    /// on the record (what a kernel without the raw tracepoint falls back to, untried here
    /// otherwise). Root and tracefs only.
    #[test]
    fn the_verifier_takes_every_program_raw_and_on_the_record() {
        let layout = match setup() {
            Ok(layout) if nix::unistd::geteuid().is_root() => layout,
            Ok(_) => return eprintln!("skipped: not root"),
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let threads = Map::create(MapKind::Hash, 4, program::THREAD_VALUE, 16).unwrap();
        let cpus = Map::create(MapKind::Array, 4, program::CPU_VALUE, 2).unwrap();
        let target = program::Target {
            threads: threads.raw_fd(),
            cpus: cpus.raw_fd(),
            tgid: std::process::id(),
        };
        for (kind, fields) in [
            (ProgramKind::RawTracepoint, RAW_ARGS),
            (ProgramKind::Tracepoint, layout.record),
        ] {
            for (event, insns) in programs(target, &fields).iter().enumerate() {
                if let Err(e) = Program::load(kind, insns) {
                    panic!("{kind:?} {}: {e}", EVENTS[event].1);
                }
            }
        }
        let switch = program::sched_switch(target, &layout.prev_state, &layout.next_pid);
        Program::load(ProgramKind::Tracepoint, &switch).unwrap();
    }

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
        assert_eq!(f["next_pid"].offset, 56);
    }

    fn sums(values: &[(i16, u64)]) -> ThreadSums {
        let mut s = ThreadSums::default();
        for &(off, v) in values {
            s.0[off as usize / 8] = v;
        }
        s
    }

    /// The window's part of each thread's sums: differences, and time off CPU cut at both
    /// edges.
    #[test]
    fn a_window_is_the_difference_of_its_edges_with_absences_cut_at_both() {
        use program::*;
        let open = Snapshot {
            at_ns: 1_000,
            threads: HashMap::from([
                // 10: copied before the window; off CPU since 900 (asleep).
                (
                    10,
                    sums(&[(COPY_CALLS, 3), (COPY_BYTES, 4096), (OFF_CPU_NS, 50), (OFF_SINCE, 900)]),
                ),
                // 20: on CPU at the open.
                (20, sums(&[(VOLUNTARY, 2)])),
                // 40: off CPU since 950 and still off at the close.
                (40, sums(&[(OFF_SINCE, 950)])),
            ]),
            cpus: BTreeMap::new(),
        };
        let close = Snapshot {
            at_ns: 2_000,
            threads: HashMap::from([
                // 10 came back at 1_100 (adding 200 ns, 100 of them before the open), copied
                // twice, and is on CPU at the close.
                (
                    10,
                    sums(&[
                        (COPY_CALLS, 5),
                        (COPY_BYTES, 4096 + 69632),
                        (OFF_CPU_NS, 250),
                        (WAKEUPS, 1),
                    ]),
                ),
                // 20 left at 1_700 and has not come back.
                (20, sums(&[(VOLUNTARY, 3), (OFF_SINCE, 1_700)])),
                (40, sums(&[(OFF_SINCE, 950)])),
                // 30: first seen in the window, preempted once, off 120 ns.
                (30, sums(&[(INVOLUNTARY, 1), (OFF_CPU_NS, 120)])),
            ]),
            cpus: BTreeMap::new(),
        };
        let w = window_threads(&open, &close);
        assert_eq!((w[&10].copy_calls, w[&10].copy_bytes), (2, 69632));
        assert_eq!((w[&10].off_cpu_ns, w[&10].wakeups), (100, 1));
        assert_eq!((w[&20].voluntary, w[&20].off_cpu_ns), (1, 300));
        assert_eq!(w[&40].off_cpu_ns, 1_000, "off the whole window");
        assert_eq!((w[&30].involuntary, w[&30].off_cpu_ns), (1, 120));
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
