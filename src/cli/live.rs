//! The live view (`--live`, and every run the launcher starts): a terminal UI fed as a
//! [`Sink`] — progress per cell with an ETA, the results so far as a chart (throughput against
//! message size per copy mode for net-stream, the headline metric per case otherwise) and the
//! warnings and failed cells as they come.
//!
//! It must not disturb what it measures: it draws at most twice a second from a thread of its
//! own, pinned off the CPUs the plan's cases pin their threads to; the sink only appends to a
//! shared state under a mutex (docs/benchmarks.md has its measured CPU cost). `q` stops the run
//! the way a first Ctrl-C does — the cell in flight is discarded, finished cells are kept, the
//! run ends interrupted — by requesting the same [`Stop`] the signal handler sets; Ctrl-C
//! (which the terminal's raw mode turns into a key) raises SIGINT, so a second one still
//! forces the exit.
//!
//! Without a terminal on stdin and stdout `--live` is refused (exit 2): a view nobody can see
//! or stop is a mistake worth saying, and a pipe must never receive escape codes.

use super::error::usage;
use crate::case::{format_bytes, Case, StreamCase};
use crate::measure::stats::median_of;
use crate::observation::Role;
use crate::stop::Stop;
use crate::sweep::{Cell, CellOutcome, Plan, RunEnd, Sink};
use ratatui::prelude::*;
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, Gauge, GraphType, Paragraph};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the view is drawn.
pub const FRAME: Duration = Duration::from_millis(500);
/// How often the view thread looks for a key or the end of the run.
const POLL: Duration = Duration::from_millis(250);

/// Whether a person can see and drive a terminal UI here.
pub fn terminal_ok() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The refusal of `--live` without a terminal (exit 2).
pub fn check_terminal() -> anyhow::Result<()> {
    if terminal_ok() {
        Ok(())
    } else {
        Err(usage(
            "--live needs a terminal on stdin and stdout (this is a pipe or a file); run without --live",
        ))
    }
}

/// The CPUs the plan's cases pin their threads to.
pub fn experiment_cpus(plan: &Plan) -> Vec<usize> {
    let mut cpus: Vec<usize> = Vec::new();
    for case in &plan.cases {
        let pinning = case.as_workload().pinning();
        cpus.extend(
            [pinning.client, pinning.server]
                .into_iter()
                .flatten()
                .flat_map(|l| l.iter().copied()),
        );
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The CPUs the view's thread may use: the allowed ones minus the experiment's; None when the
/// experiment pins nothing (or everything: then the view cannot avoid it).
pub fn view_cpus(allowed: &[usize], experiment: &[usize]) -> Option<Vec<usize>> {
    if experiment.is_empty() {
        return None;
    }
    let free: Vec<usize> = allowed.iter().copied().filter(|c| !experiment.contains(c)).collect();
    (!free.is_empty()).then_some(free)
}

/// One point of the chart: a case's headline value in one repetition.
#[derive(Default)]
struct State {
    labels: Vec<String>,
    planned_s: Vec<f64>,
    done: usize,
    failed: usize,
    started: Option<Instant>,
    cell_started: Option<Instant>,
    elapsed_done_s: f64,
    planned_done_s: f64,
    /// Case position -> (case, values so far).
    values: BTreeMap<usize, (Case, Vec<f64>)>,
    /// Failed cells, in the order they came.
    failures: Vec<String>,
    /// Workload warnings by kind, in the order each kind first came: (title, cells, the
    /// latest cell and text).
    warnings: Vec<(String, usize, String)>,
    stopping: bool,
    finished: bool,
    placement: String,
    warmup: bool,
    title: String,
    /// Every case is a net-stream case: the chart is throughput against size.
    stream: bool,
    /// The headline metric the bars show (the first case's workload's).
    metric: &'static str,
}

impl State {
    fn eta_s(&self) -> Option<f64> {
        let left: f64 = self.planned_s.iter().skip(self.done).sum();
        let remaining = self.labels.len().saturating_sub(self.done) as f64;
        if self.done == 0 {
            return (left > 0.0).then_some(left);
        }
        if self.planned_done_s > 0.0 {
            Some(left * self.elapsed_done_s / self.planned_done_s)
        } else {
            Some(self.elapsed_done_s / self.done as f64 * remaining)
        }
    }
}

/// The headline value of one outcome: the workload's headline metric, or the first system
/// metric with a value (a microbenchmark without latency).
fn headline_value(case: &Case, outcome: &CellOutcome) -> Option<(f64, String, String)> {
    let obs = outcome.result.as_ref().ok()?;
    let (name, role, _) = crate::report::cells::headline(case);
    let metric = obs
        .get(name, role)
        .filter(|m| m.value.is_some_and(f64::is_finite))
        .or_else(|| {
            obs.metrics
                .iter()
                .find(|m| m.role == Role::System && m.value.is_some_and(f64::is_finite))
        })?;
    Some((metric.value?, metric.name.clone(), metric.unit.clone()))
}

/// The live view as a sink: `begin` takes over the terminal and starts the view's thread,
/// each cell is appended to the state it draws (the sink never draws), and `finish` gives the
/// terminal back, after which what was written to stderr meanwhile comes out. A view that
/// cannot start is said in one line and the run goes on with the plain progress instead.
pub struct LiveSink {
    state: Arc<Mutex<State>>,
    stop: Stop,
    view: Option<LiveView>,
    /// The progress the run shows when the view could not start.
    fallback: Option<super::progress::ProgressSink>,
}

impl LiveSink {
    /// A sink whose view starts with the run; `q` in it requests `stop`.
    pub fn new(stop: Stop) -> LiveSink {
        LiveSink {
            state: Arc::default(),
            stop,
            view: None,
            fallback: None,
        }
    }
}

impl Sink for LiveSink {
    fn begin(&mut self, plan: &Plan, cells: &[Cell]) -> anyhow::Result<()> {
        match LiveView::start(plan, cells, self.stop) {
            Ok(view) => {
                self.state = view.state.clone();
                self.view = Some(view);
                Ok(())
            }
            Err(e) => {
                crate::tell!("note: no live view ({e:#}); the run goes on without it");
                let mut progress = super::progress::ProgressSink::default();
                let begun = progress.begin(plan, cells);
                self.fallback = Some(progress);
                begun
            }
        }
    }

    fn warmup_started(&mut self, case: &Case) -> anyhow::Result<()> {
        match &mut self.fallback {
            Some(progress) => progress.warmup_started(case),
            None => Ok(()),
        }
    }

    fn cell_started(&mut self, case: &Case, cell: Cell) -> anyhow::Result<()> {
        if let Some(progress) = &mut self.fallback {
            return progress.cell_started(case, cell);
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.cell_started = Some(Instant::now());
        s.warmup = false;
        Ok(())
    }

    fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        if let Some(progress) = &mut self.fallback {
            return progress.cell_finished(case, cell, outcome);
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let label = format!("{} rep {}", case.label(), cell.repetition);
        s.elapsed_done_s += outcome.elapsed_s;
        s.planned_done_s += s.planned_s.get(s.done).copied().unwrap_or(0.0);
        s.done += 1;
        match &outcome.result {
            Ok(obs) => {
                for w in &obs.warnings {
                    let title = w.kind.title().to_string();
                    // Warning and error texts can hold a peer's words: escaped for the terminal.
                    let latest = super::output::safe(&format!("{label}: {}", w.text)).into_owned();
                    match s.warnings.iter_mut().find(|k| k.0 == title) {
                        Some(k) => {
                            k.1 += 1;
                            k.2 = latest;
                        }
                        None => s.warnings.push((title, 1, latest)),
                    }
                }
            }
            Err(e) => {
                s.failed += 1;
                let line = super::output::safe(&format!("failed: {label}: {e}")).into_owned();
                // The line the plain progress prints: stderr is held while the view is up and
                // comes out after it, so the failures are still there once the view is gone.
                crate::tell!("cell {line}");
                s.failures.push(line);
            }
        }
        let entry = s
            .values
            .entry(cell.position)
            .or_insert_with(|| (case.clone(), Vec::new()));
        if let Some((v, _, _)) = headline_value(case, outcome) {
            entry.1.push(v);
        }
        Ok(())
    }

    fn finish(&mut self, end: &RunEnd) -> anyhow::Result<()> {
        if let Some(view) = self.view.take() {
            view.finish();
        }
        match &mut self.fallback {
            Some(progress) => progress.finish(end),
            None => Ok(()),
        }
    }
}

/// The running view: its thread and the state it draws.
pub struct LiveView {
    state: Arc<Mutex<State>>,
    thread: Option<std::thread::JoinHandle<()>>,
    stderr: Option<StderrCapture>,
    _restore_on_forced_exit: crate::sys::signal::ForcedExitGuard,
}

/// The real stderr while the view holds the terminal (-1: not captured).
static SAVED_STDERR: std::sync::Mutex<Option<std::os::fd::OwnedFd>> = std::sync::Mutex::new(None);

/// Lines written to stderr while the view is up (the runner's notes, a workload's messages)
/// would be drawn over it: they go to a pipe and are written out once the terminal is back.
struct StderrCapture {
    reader: std::thread::JoinHandle<Vec<u8>>,
}

impl StderrCapture {
    fn start() -> Option<StderrCapture> {
        use std::io::Read;
        let (read, write) = nix::unistd::pipe().ok()?;
        let saved = nix::unistd::dup(std::io::stderr()).ok()?;
        // On failure `saved` is dropped, which closes it.
        nix::unistd::dup2_stderr(&write).ok()?;
        drop(write);
        *SAVED_STDERR.lock().unwrap_or_else(|p| p.into_inner()) = Some(saved);
        let reader = std::thread::Builder::new()
            .name("iopath-live-stderr".into())
            .spawn(move || {
                let mut bytes = Vec::new();
                let _ = std::fs::File::from(read).read_to_end(&mut bytes);
                bytes
            });
        match reader {
            Ok(reader) => Some(StderrCapture { reader }),
            Err(_) => {
                release_stderr();
                None
            }
        }
    }

    /// Give stderr back and write out what was captured.
    fn finish(self) {
        release_stderr();
        if let Ok(bytes) = self.reader.join() {
            use std::io::Write;
            let _ = std::io::stderr().write_all(&bytes);
        }
    }
}

fn release_stderr() {
    let saved = SAVED_STDERR.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(saved) = saved {
        let _ = nix::unistd::dup2_stderr(&saved);
    }
}

fn restore_terminal() {
    release_stderr();
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

impl LiveView {
    /// Take over the terminal and start drawing `cells` of `plan`; `q` requests `stop`.
    pub fn start(plan: &Plan, cells: &[Cell], stop: Stop) -> anyhow::Result<LiveView> {
        check_terminal()?;
        let experiment = experiment_cpus(plan);
        let allowed = crate::sys::affinity::allowed_cpus().unwrap_or_default();
        let pin = view_cpus(&allowed, &experiment);
        let placement = match (&pin, experiment.is_empty()) {
            (_, true) => "view unpinned (the experiment pins nothing)".to_string(),
            (Some(cpus), _) => format!("view on CPUs {}", crate::case::CpuList::new(cpus.clone())),
            (None, false) => "view shares the experiment's CPUs (it pins them all)".to_string(),
        };
        let state = Arc::new(Mutex::new(State {
            labels: cells
                .iter()
                .filter_map(|c| {
                    plan.cases
                        .get(c.position)
                        .map(|k| super::output::safe(&format!("{} rep {}", k.label(), c.repetition)).into_owned())
                })
                .collect(),
            planned_s: cells
                .iter()
                .map(|c| plan.cases.get(c.position).map_or(0.0, Case::planned_seconds))
                .collect(),
            started: Some(Instant::now()),
            cell_started: Some(Instant::now()),
            placement,
            warmup: plan.warmup_cell,
            // A microbenchmark's headline is its bench's: no one name for the title.
            metric: plan
                .cases
                .first()
                .and_then(|c| c.as_workload().kind_headline())
                .unwrap_or("headline metric"),
            stream: !plan.cases.is_empty() && plan.cases.iter().all(|c| c.get::<StreamCase>().is_some()),
            title: format!(
                "iopath {}{}",
                plan.cases.first().map_or("", |c| c.workload()),
                plan.name
                    .as_ref()
                    .map(|n| format!(" \"{}\"", super::output::safe(n)))
                    .unwrap_or_default()
            ),
            ..State::default()
        }));
        crossterm::terminal::enable_raw_mode()?;
        crossterm::execute!(
            std::io::stdout(),
            crossterm::terminal::EnterAlternateScreen,
            crossterm::cursor::Hide
        )?;
        let guard = crate::sys::signal::on_forced_exit(restore_terminal);
        let stderr = StderrCapture::start();
        let shared = state.clone();
        let thread = std::thread::Builder::new().name("iopath-live".into()).spawn(move || {
            if let Some(cpus) = pin {
                let _ = crate::sys::affinity::pin_current_thread(&cpus);
            }
            view_loop(&shared, stop);
        });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                restore_terminal();
                if let Some(c) = stderr {
                    c.finish();
                }
                return Err(e.into());
            }
        };
        Ok(LiveView {
            state,
            thread: Some(thread),
            stderr,
            _restore_on_forced_exit: guard,
        })
    }

    /// Stop drawing and give the terminal back.
    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).finished = true;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            restore_terminal();
        }
        if let Some(c) = self.stderr.take() {
            c.finish();
        }
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.end();
    }
}

fn view_loop(state: &Mutex<State>, stop: Stop) {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    let Ok(mut terminal) = Terminal::new(CrosstermBackend::new(std::io::stdout())) else {
        return;
    };
    let mut last_draw: Option<Instant> = None;
    loop {
        let finished = state.lock().map(|s| s.finished).unwrap_or(true);
        if finished {
            return;
        }
        if last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
            let s = state.lock().unwrap_or_else(|p| p.into_inner());
            let _ = terminal.draw(|f| draw(f, &s));
            drop(s);
            last_draw = Some(Instant::now());
        }
        if !event::poll(POLL).unwrap_or(false) {
            continue;
        }
        let Ok(Event::Key(key)) = event::read() else { continue };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        if key.code == KeyCode::Char('q') || ctrl_c {
            state.lock().unwrap_or_else(|p| p.into_inner()).stopping = true;
            if ctrl_c {
                // What the terminal would have sent: the first stops, a second forces the exit.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT);
            } else {
                stop.request();
            }
            last_draw = None;
        }
    }
}

fn fmt_s(s: f64) -> String {
    crate::format::format_duration_s(s.max(0.0))
}

fn draw(f: &mut Frame, s: &State) {
    let warn_rows = ((s.warnings.len() + s.failures.len().min(3)).min(8) as u16).max(1) + 2;
    let [top, chart, warnings, help] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(6),
        Constraint::Length(warn_rows),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let total = s.labels.len();
    let now = s.cell_started.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0);
    let current = if s.stopping {
        "stopping: the cell in flight is discarded, finished cells are kept".to_string()
    } else if s.warmup && s.done == 0 {
        format!("warm-up cell, then {}", s.labels.first().cloned().unwrap_or_default())
    } else {
        match s.labels.get(s.done) {
            Some(l) => format!("cell {}/{total}: {l} ({})", s.done + 1, fmt_s(now)),
            None => "finishing".to_string(),
        }
    };
    let eta = s.eta_s().map(fmt_s).unwrap_or_else(|| "?".into());
    let elapsed = s.started.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0);
    let ratio = if total == 0 { 1.0 } else { s.done as f64 / total as f64 };
    let gauge = Gauge::default()
        .block(Block::default().borders(Borders::TOP).title(format!(
            " {} — {}/{total} cells, {} failed, {} elapsed, eta {eta} ",
            s.title,
            s.done,
            s.failed,
            fmt_s(elapsed)
        )))
        .gauge_style(Style::default().fg(Color::Cyan))
        .ratio(ratio.clamp(0.0, 1.0))
        .label(format!("{:.0}%", ratio * 100.0));
    let [g, c] = Layout::vertical([Constraint::Length(2), Constraint::Length(2)]).areas(top);
    f.render_widget(gauge, g);
    f.render_widget(Paragraph::new(current), c);
    draw_chart(f, chart, s);
    let mut lines: Vec<Line> = s
        .failures
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|w| Line::from(w.as_str()).style(Style::default().fg(Color::Red)))
        .collect();
    lines.extend(s.warnings.iter().map(|(title, cells, latest)| {
        Line::from(vec![
            Span::styled(format!("{title} ({cells} cells): "), Style::default().fg(Color::Yellow)),
            Span::raw(latest.as_str()),
        ])
    }));
    if lines.is_empty() {
        lines.push(Line::from("none so far"));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::TOP).title(format!(
            " failed cells ({}) and warnings ({} kinds) ",
            s.failures.len(),
            s.warnings.len()
        ))),
        warnings,
    );
    f.render_widget(
        Paragraph::new(format!("q: stop (keeps finished cells, like Ctrl-C)   {}", s.placement))
            .style(Style::default().add_modifier(Modifier::DIM)),
        help,
    );
}

const COLORS: [Color; 6] = [
    Color::Cyan,
    Color::Green,
    Color::Magenta,
    Color::Yellow,
    Color::Blue,
    Color::Red,
];

fn draw_chart(f: &mut Frame, area: Rect, s: &State) {
    if s.stream {
        draw_stream_chart(f, area, s);
    } else {
        draw_bars(f, area, s);
    }
}

/// Throughput (median of the repetitions so far) against log2 of the message size, one line
/// per mode and thread count.
fn draw_stream_chart(f: &mut Frame, area: Rect, s: &State) {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut min_size, mut max_size, mut max_y) = (u64::MAX, 0u64, 0.0f64);
    for (case, values) in s.values.values() {
        let Some(c) = case.get::<StreamCase>() else { continue };
        let Some(m) = median_of(values) else { continue };
        let name = format!("{} t{}", c.mode, c.net.threads);
        series.entry(name).or_default().push(((c.size.max(1) as f64).log2(), m));
        min_size = min_size.min(c.size.max(1));
        max_size = max_size.max(c.size.max(1));
        max_y = max_y.max(m);
    }
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    if series.is_empty() {
        f.render_widget(
            Paragraph::new("no results yet").block(Block::default().borders(Borders::TOP).title(" throughput ")),
            area,
        );
        return;
    }
    let (x0, x1) = (
        (min_size as f64).log2(),
        (max_size as f64).log2().max((min_size as f64).log2() + 1.0),
    );
    let datasets: Vec<Dataset> = series
        .iter()
        .enumerate()
        .map(|(i, (name, points))| {
            Dataset::default()
                .name(name.clone())
                .marker(symbols::Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(COLORS[i % COLORS.len()]))
                .data(points)
        })
        .collect();
    let y1 = if max_y > 0.0 { max_y * 1.1 } else { 1.0 };
    let chart = Chart::new(datasets)
        .legend_position(Some(ratatui::widgets::LegendPosition::TopLeft))
        .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)))
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(" throughput (Gbit/s, median so far) vs message size "),
        )
        .x_axis(Axis::default().bounds([x0, x1]).labels(vec![
            Line::from(format_bytes(min_size)),
            Line::from(format_bytes(2f64.powf(x1) as u64)),
        ]))
        .y_axis(
            Axis::default()
                .bounds([0.0, y1])
                .labels(vec![Line::from("0"), Line::from(format!("{y1:.1}"))]),
        );
    f.render_widget(chart, area);
}

/// The headline metric per case (median so far) as horizontal bars.
fn draw_bars(f: &mut Frame, area: Rect, s: &State) {
    let rows: Vec<(String, Option<f64>)> = s
        .values
        .values()
        .map(|(case, values)| (case.label(), median_of(values)))
        .collect();
    let metric = s.metric;
    let max = rows.iter().filter_map(|r| r.1).fold(0.0f64, f64::max);
    let label_w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).min(40);
    let bar_w = (area.width as usize).saturating_sub(label_w + 16).max(4);
    let visible = area.height.saturating_sub(1) as usize;
    let skip = rows.len().saturating_sub(visible);
    let lines: Vec<Line> = rows
        .iter()
        .skip(skip)
        .enumerate()
        .map(|(i, (label, v))| {
            let label: String = label.chars().take(label_w).collect();
            let (bar, text) = match v {
                Some(v) if max > 0.0 => (
                    "█".repeat(((v / max) * bar_w as f64).round() as usize),
                    crate::report::fmt_num(Some(*v)),
                ),
                Some(v) => (String::new(), crate::report::fmt_num(Some(*v))),
                None => (String::new(), "n/a".to_string()),
            };
            Line::from(vec![
                Span::raw(format!("{label:<label_w$} ")),
                Span::styled(bar, Style::default().fg(COLORS[(i + skip) % COLORS.len()])),
                Span::raw(format!(" {text}")),
            ])
        })
        .collect();
    let body = if lines.is_empty() {
        vec![Line::from("no results yet")]
    } else {
        lines
    };
    f.render_widget(
        Paragraph::new(body).block(
            Block::default()
                .borders(Borders::TOP)
                .title(format!(" {metric} per case (median so far) ")),
        ),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{FakeBehaviour, FakeCase};

    #[test]
    fn the_view_avoids_the_experiment_cpus() {
        assert_eq!(view_cpus(&[0, 1, 2, 3], &[]), None);
        assert_eq!(view_cpus(&[0, 1, 2, 3], &[0, 2]), Some(vec![1, 3]));
        assert_eq!(view_cpus(&[0, 1], &[0, 1]), None);
    }

    #[test]
    fn the_sink_keeps_values_warnings_and_failures() {
        let state = Arc::new(Mutex::new(State {
            labels: vec!["a".into(), "b".into()],
            planned_s: vec![1.0, 1.0],
            ..State::default()
        }));
        let mut sink = LiveSink::new(Stop::never());
        sink.state = state.clone();
        let case = Case::Fake(FakeCase {
            index: 0,
            behaviour: FakeBehaviour::Ok { value: 3 },
        });
        let ok = CellOutcome {
            result: crate::fake::run(
                &FakeCase {
                    index: 0,
                    behaviour: FakeBehaviour::Ok { value: 3 },
                },
                Stop::never(),
            )
            .map_err(|e| e.to_string()),
            elapsed_s: 2.0,
        };
        let cell = Cell {
            position: 0,
            repetition: 0,
        };
        sink.cell_finished(&case, cell, &ok).unwrap();
        {
            let s = state.lock().unwrap();
            assert_eq!(s.values[&0].1, vec![3.0]);
            assert_eq!(s.eta_s(), Some(2.0), "one planned second left, running twice as slow");
        }
        let failed = CellOutcome {
            result: Err("boom".into()),
            elapsed_s: 0.1,
        };
        sink.cell_finished(
            &case,
            Cell {
                position: 0,
                repetition: 1,
            },
            &failed,
        )
        .unwrap();
        for rep in [2, 3] {
            let mut obs = crate::observation::Observation::default();
            obs.warn(crate::warning::WarningKind::Unpinned, format!("unpinned {rep}"));
            let warned = CellOutcome {
                result: Ok(obs),
                elapsed_s: 0.1,
            };
            sink.cell_finished(
                &case,
                Cell {
                    position: 0,
                    repetition: rep,
                },
                &warned,
            )
            .unwrap();
        }
        let s = state.lock().unwrap();
        assert_eq!((s.done, s.failed), (4, 1));
        assert_eq!(s.warnings.len(), 1, "one line per kind: {:?}", s.warnings);
        assert_eq!(s.warnings[0].1, 2);
        assert!(
            s.warnings[0].2.ends_with("rep 3: unpinned 3"),
            "repetitions from 0, as stored: {:?}",
            s.warnings
        );
        assert!(s.failures[0].contains("boom"), "{:?}", s.failures);
    }

    #[test]
    fn the_view_draws_both_charts() {
        use ratatui::backend::TestBackend;
        let mut state = State {
            metric: "value",
            labels: vec!["x".into()],
            planned_s: vec![1.0],
            ..State::default()
        };
        state.values.insert(
            0,
            (
                Case::Fake(FakeCase {
                    index: 0,
                    behaviour: FakeBehaviour::Ok { value: 3 },
                }),
                vec![3.0],
            ),
        );
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal.draw(|f| draw(f, &state)).unwrap();
        let text: String = terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        assert!(text.contains("value per case"), "{text}");
        assert!(text.contains("q: stop"), "{text}");
    }
}
