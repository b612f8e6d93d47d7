//! TCP on loopback: round-trip time of 1-byte messages, peak bandwidth of one connection,
//! connection set-up (connect() until it returns) and tear-down (close() on the client until
//! the server's read sees the end of file). A server thread in this process serves each
//! variant; it is always stopped and joined, also when the client side fails.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::net::topology::{Net, Topology};
use crate::observation::names;
use crate::observation::{Observation, Source};
use crate::stop::Stop;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

pub const VARIANTS: &[&str] = crate::case::Bench::Tcp.variants();
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Wakes the server's accept() and tells it to stop, when dropped.
struct StopServer<'a> {
    stop: &'a AtomicBool,
    addr: SocketAddr,
    /// Where the client lives: the wake-up connection must come from there.
    net: &'a Net,
}

impl Drop for StopServer<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let addr = self.addr;
        let _ = self
            .net
            .on_client_side(|| TcpStream::connect_timeout(&addr, Duration::from_secs(1)));
    }
}

/// A stop request is noticed between samples (rtt), every MiB of a burst (bandwidth) and
/// every connection (connect, teardown); the client then closes its connection, which ends
/// the server's read, and the server thread is stopped and joined as on any return.
pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let variant = case.option("variant").unwrap_or("rtt").to_string();
    if !VARIANTS.contains(&variant.as_str()) {
        anyhow::bail!("tcp: unknown variant '{variant}' (accepted: {})", VARIANTS.join(", "));
    }
    let budget = Budget::of(case);
    let quick = harness::is_quick(case);
    let topology = match case.option("topology") {
        Some(text) => text.parse::<Topology>().map_err(|e| anyhow::anyhow!("tcp: {e}"))?,
        None => Topology::Loopback,
    };
    if !topology.starts_server() {
        anyhow::bail!("tcp: the micro benchmark starts its own server; --topology {topology} is not accepted");
    }
    let topology = topology.establish()?;
    let listener = topology.bind(0)?;
    let addr = listener.local_addr()?;
    let server_stop = AtomicBool::new(false);
    let (ends_tx, ends_rx) = mpsc::channel::<u64>();
    let mut obs = Observation::default();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let server = topology.spawn_server(scope, "iopath-tcp-server", || {
            serve(&listener, &server_stop, &variant, ends_tx)
        })?;
        let guard = StopServer {
            stop: &server_stop,
            addr,
            net: &topology,
        };
        let (v, o) = (variant.as_str(), &mut obs);
        let result = topology.on_client_side(move || client(v, addr, budget, stop, quick, &ends_rx, o));
        drop(guard);
        let served = server
            .join()
            .map_err(|_| anyhow::anyhow!("tcp server thread panicked"))?;
        result?;
        served
    })?;
    harness::push_overheads(&mut obs);
    Ok(obs)
}

/// The server: one connection at a time until told to stop.
fn serve(listener: &TcpListener, stop: &AtomicBool, variant: &str, ends: mpsc::Sender<u64>) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut conn = conn?;
        conn.set_read_timeout(Some(IO_TIMEOUT))?;
        conn.set_nodelay(true)?;
        match variant {
            "rtt" => loop {
                match conn.read(&mut buf[..1])? {
                    0 => break,
                    _ => conn.write_all(&buf[..1])?,
                }
            },
            "bandwidth" => loop {
                // Each burst: an 8-byte length, that many bytes, then a 1-byte acknowledgement.
                let mut header = [0u8; 8];
                if conn.read_exact(&mut header).is_err() {
                    break;
                }
                let mut left = u64::from_le_bytes(header);
                while left > 0 {
                    let want = left.min(buf.len() as u64) as usize;
                    let n = conn.read(&mut buf[..want])?;
                    if n == 0 {
                        anyhow::bail!("tcp bandwidth: client closed mid-burst");
                    }
                    left -= n as u64;
                }
                conn.write_all(&[1])?;
            },
            // Wait for the client to close first: a server that closes first leaves its side
            // in TIME_WAIT, and a later SYN that reuses the 4-tuple on loopback then waits for
            // a 1 s retransmission.
            "connect" => while conn.read(&mut buf[..1])? != 0 {},
            "teardown" => {
                // Wait for the client's close: read returns 0.
                while conn.read(&mut buf[..1])? != 0 {}
                let _ = ends.send(harness::now());
            }
            _ => {}
        }
    }
    Ok(())
}

fn client(
    variant: &str,
    addr: SocketAddr,
    budget: Budget,
    stop: Stop,
    quick: bool,
    ends: &mpsc::Receiver<u64>,
    obs: &mut Observation,
) -> anyhow::Result<()> {
    let connect = || -> std::io::Result<TcpStream> {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        Ok(s)
    };
    // The server thread competes with this one for the CPU (on loopback both may share
    // one): its wait is measured. Declared here, on the thread that times the samples.
    harness::own_tasks_compete();
    match variant {
        "rtt" => {
            let mut s = connect()?;
            let mut byte = [7u8; 1];
            let ns = harness::time_per_op(budget, stop, || -> std::io::Result<()> {
                s.write_all(&byte)?;
                s.read_exact(&mut byte)
            })?;
            let us: Vec<f64> = ns.iter().map(|v| v / 1000.0).collect();
            push_summary(obs, names::ROUND_TRIP_US, "us", &us, Source::Tool);
            s.shutdown(Shutdown::Both)?;
        }
        "bandwidth" => {
            let mut s = connect()?;
            let burst: u64 = if quick { 32 << 20 } else { 256 << 20 };
            let chunk = vec![0xa5u8; 1 << 20];
            let samples = budget.samples.min(if quick { 3 } else { 9 });
            let mut gbps = Vec::with_capacity(samples);
            for i in 0..=samples {
                let t0 = harness::now();
                s.write_all(&burst.to_le_bytes())?;
                // One look at the flag per MiB written: nothing next to the copy itself.
                harness::write_in_chunks(&mut s, &chunk, burst, stop)?;
                let mut ack = [0u8; 1];
                s.read_exact(&mut ack)?;
                let t1 = harness::now();
                if i > 0 {
                    // Burst 0 is warm-up (slow start, buffer growth).
                    gbps.push(burst as f64 * 8.0 / harness::interval_ns(t0, t1));
                }
            }
            push_summary(obs, names::BANDWIDTH_GBPS, "Gbit/s", &gbps, Source::Tool);
            s.shutdown(Shutdown::Both)?;
        }
        "connect" | "teardown" => {
            let count = budget.samples * if quick { 5 } else { 20 };
            let mut us = Vec::with_capacity(count);
            for i in 0..count + 3 {
                harness::check(stop)?;
                let t0 = harness::now();
                let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
                let t1 = harness::now();
                if variant == "connect" {
                    drop(s);
                    if i >= 3 {
                        us.push(harness::interval_ns(t0, t1) / 1000.0);
                    }
                } else {
                    let t2 = harness::now();
                    drop(s);
                    let end = ends.recv_timeout(IO_TIMEOUT)?;
                    if i >= 3 {
                        us.push(harness::interval_ns(t2, end) / 1000.0);
                    }
                }
            }
            let name = if variant == "connect" {
                names::CONNECT_TIME_US
            } else {
                names::TEARDOWN_TIME_US
            };
            push_summary(obs, name, "us", &us, Source::Tool);
        }
        _ => {}
    }
    Ok(())
}
