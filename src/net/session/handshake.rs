//! The start of every session: the client's hello, the server's key challenge and the
//! client's answer, then `ready` — or a refusal of a [`RefusalKind`], which travels on the wire
//! beside its text so that a client matches it by kind.
//!
//! The client side is [`client`], one function for every network workload. The server side
//! is [`greet`] (what a new connection is: a hello or a data connection) and [`challenge`].

use super::served::Hello;
use crate::net::auth::Credentials;
pub use crate::net::control::RefusalKind;
use crate::net::control::{decode_data_header, Control, ControlChannel, HelloError, DATA_HEADER_LEN};
use crate::observation::Unsupported;
use crate::stop::{Interrupted, Stop};
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// How long a new connection may take to say what it is: a whole hello line, or a data
/// connection's header. A deadline for the whole message, not for each read.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// How long a new connection may stay silent: clients speak as soon as they connect.
pub const FIRST_BYTE_DEADLINE: Duration = Duration::from_secs(2);
/// How often every wait looks at the stop flag.
pub(crate) const SLICE: Duration = Duration::from_millis(20);

/// What the server said yes with: the session token (stream data connections carry it) and
/// the session's own data port (rr, crr, records; None from a stream server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    pub token: u64,
    pub port: Option<u16>,
}

/// A session server's `ready` with the session's own data port. `port` is None from a server
/// older than the workload (a stream server's `ready` has no port).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ReadyLine {
    #[serde(rename = "type")]
    pub kind: String,
    pub token: u64,
    pub port: Option<u16>,
}

/// A session a server refused before answering `ready`: the kind and the words sent to the
/// client. On the server it is the session's error (`net serve` logs it as refused, not
/// failed); its text is the server's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub error: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

impl std::error::Error for Refusal {}

/// A refusal as the client reports it: the server's words after what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRefused(pub Refusal);

impl std::fmt::Display for ServerRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.kind {
            // The server's words begin with `refused: …`.
            RefusalKind::Key => write!(f, "the server {}", self.0.error),
            _ => write!(f, "the server refused the case: {}", self.0.error),
        }
    }
}

impl std::error::Error for ServerRefused {}

/// Send `error` to the client as a `refused` of `kind` and return it as a [`Refusal`].
pub fn refuse(control: &mut ControlChannel, kind: RefusalKind, error: String) -> anyhow::Error {
    control.send(&refused(kind, &error)).ok();
    anyhow::Error::new(Refusal { kind, error })
}

/// The `refused` control message.
pub fn refused(kind: RefusalKind, error: &str) -> Control {
    Control::Refused {
        error: error.to_string(),
        kind,
    }
}

pub use crate::net::auth::ServerProof;

/// A server that did not prove it holds the key (no proof where one was required, or a wrong
/// one): the client refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unproven(pub String);

impl std::fmt::Display for Unproven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unproven {}

/// The client's side: send `hello`, answer a key challenge with the key of `credentials`, and
/// return the server's `ready`. Each answer is awaited at most `wait`; a stop ends the wait as
/// `Interrupted`. A refusal comes back as a [`ServerRefused`] (match it by `.0.kind`), a
/// kernel refusal on the server (`unavailable`) as an [`Unsupported`]. With a key the client
/// asks the server to prove it too; the proof is required when the credentials say so.
pub fn client<H: Serialize>(
    control: &mut ControlChannel,
    hello: &H,
    credentials: &Credentials,
    wait: Duration,
    stop: Stop,
) -> anyhow::Result<Ready> {
    client_with(control, hello, credentials.key(), credentials.server_proof, wait, stop)
}

/// [`client`] with the server's proof demanded as `proof` says. Without a key, a required
/// proof cannot be checked: the server is refused as [`Unproven`].
pub fn client_with<H: Serialize>(
    control: &mut ControlChannel,
    hello: &H,
    psk: Option<&[u8]>,
    proof: ServerProof,
    wait: Duration,
    stop: Stop,
) -> anyhow::Result<Ready> {
    control.send_json(hello)?;
    let stopped = || stop.requested();
    // Our nonce and the server's challenge, once sent; whether the server proved the key.
    let mut asked: Option<(String, String)> = None;
    let mut proven = false;
    loop {
        let line = control.recv_line(Some(Instant::now() + wait), &stopped);
        let answer = line
            .and_then(|line| Ok((ControlChannel::parse(&line)?, line)))
            .map_err(|e| {
                if stop.requested() {
                    anyhow::Error::new(Interrupted)
                } else {
                    anyhow::Error::new(e).context("waiting for the server to accept the case")
                }
            })?;
        match answer {
            (Control::Challenge { nonce }, _) => {
                let Some(key) = psk else {
                    bail!("the server requires a pre-shared key: give the client the server's key with --psk-file");
                };
                let ours = crate::net::auth::nonce();
                control.send(&Control::Auth {
                    mac: crate::net::auth::answer(key, &nonce),
                    nonce: Some(ours.clone()),
                })?;
                asked = Some((ours, nonce));
            }
            (Control::Proof { mac }, _) => {
                let holds = match (psk, &asked) {
                    (Some(key), Some((ours, theirs))) => crate::net::auth::verify_server_proof(key, ours, theirs, &mac),
                    _ => false,
                };
                if !holds {
                    return Err(Unproven(
                        "the server's proof of the pre-shared key is wrong: it does not hold the same key".into(),
                    )
                    .into());
                }
                proven = true;
            }
            (Control::Ready { .. }, line) => {
                if proof == ServerProof::Required && !proven {
                    let why = if asked.is_none() {
                        "the server did not challenge for a key (it was started without --psk-file), so it cannot prove it holds the same key"
                    } else {
                        "the server did not prove that it holds the pre-shared key (an iopath older than agent mode)"
                    };
                    return Err(Unproven(why.into()).into());
                }
                let ready: ReadyLine = serde_json::from_slice(&line).context("bad ready line")?;
                return Ok(Ready {
                    token: ready.token,
                    port: ready.port,
                });
            }
            (Control::Refused { error, kind }, _) => return Err(ServerRefused(Refusal { kind, error }).into()),
            (Control::Unavailable { what, reason }, _) => return Err(Unsupported::new(what, reason).into()),
            (other, _) => bail!("unexpected answer from the server: {other:?}"),
        }
    }
}

/// Whether a client's error is about the key: the server refused ours, or did not prove it
/// holds it.
pub fn key_failure(e: &anyhow::Error) -> bool {
    refusal_kind(e) == Some(RefusalKind::Key) || e.downcast_ref::<Unproven>().is_some()
}

/// The kind of a client's error when it is a server's refusal.
pub fn refusal_kind(e: &anyhow::Error) -> Option<RefusalKind> {
    e.downcast_ref::<ServerRefused>().map(|r| r.0.kind)
}

/// What a new connection turned out to be.
pub(crate) enum Greeting {
    /// A client's control connection with the case it asks for (any workload).
    Hello(ControlChannel, Box<Hello>),
    /// A data connection: the session token it carries and its thread index.
    Data(u64, u32, TcpStream),
}

/// How far a connection being greeted has come, in order: the greeting table evicts the
/// least advanced first, so a client that has answered the key challenge is never evicted
/// for one that has not, and one that sent its whole hello goes after every one still
/// dripping theirs (the key's extra round trip must not make the honest client the victim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Nothing has arrived.
    Silent,
    /// Its first byte has arrived.
    Spoke,
    /// Its whole hello has arrived and it was sent the key challenge.
    Challenged,
    /// It answered the challenge with the key.
    Answered,
}

/// Wait until `stream` is readable (or at EOF) by `deadline`, watching `quit`.
fn readable_by(stream: &TcpStream, deadline: Instant, quit: &dyn Fn() -> bool) -> anyhow::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        if quit() {
            bail!("stopped");
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!("said nothing: timed out after {}", secs(FIRST_BYTE_DEADLINE));
        };
        let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(left.min(SLICE).as_millis() as u16)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => return Ok(()),
            Err(e) => bail!("poll failed: {e}"),
        }
    }
}

pub(crate) fn secs(d: Duration) -> String {
    crate::format::format_duration_s(d.as_secs_f64())
}

/// Fill `buf` from `stream` by `deadline` (one deadline for all of it), watching `quit`.
fn read_exact_by(stream: &TcpStream, buf: &mut [u8], deadline: Instant, quit: &dyn Fn() -> bool) -> anyhow::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        if quit() {
            bail!("stopped");
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!(
                "sent {got} of {} header bytes: timed out after {}",
                buf.len(),
                secs(HELLO_DEADLINE)
            );
        };
        stream.set_read_timeout(Some(left.min(SLICE)))?;
        match (&mut &*stream).read(&mut buf[got..]) {
            Ok(0) => bail!("closed after {got} of {} header bytes", buf.len()),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => bail!("reading the header failed: {e}"),
        }
    }
    Ok(())
}

/// Find out what a new connection is: its first byte within FIRST_BYTE_DEADLINE (then
/// `progress` is told each [`Stage`] it reaches), all of it within HELLO_DEADLINE. A control connection's first byte is
/// `{` (session tokens never start with it), anything else is a data header. A hello of
/// another protocol version, or one that is not a hello (`decode`: the session server's
/// list of what it serves reads it), is answered with a refusal. `quit` ends the wait; `key`,
/// the server's, is challenged for. `workload` is set as soon as a hello names one (for the log).
pub(crate) fn greet(
    stream: TcpStream,
    (quit, key): (&dyn Fn() -> bool, Option<&[u8]>),
    decode: &dyn Fn(&[u8]) -> Result<Hello, HelloError>,
    progress: &dyn Fn(Stage),
    workload: &mut Option<&'static str>,
) -> anyhow::Result<Greeting> {
    let started = Instant::now();
    let deadline = started + HELLO_DEADLINE;
    readable_by(&stream, started + FIRST_BYTE_DEADLINE.min(HELLO_DEADLINE), quit)?;
    let mut first = [0u8; 1];
    match sock::recv(stream.as_raw_fd(), &mut first, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(0) => bail!("closed without saying anything"),
        Ok(_) => progress(Stage::Spoke),
        Err(e) => bail!("reading failed: {e}"),
    }
    if first[0] == b'{' {
        stream.set_nodelay(true).ok();
        let mut control = ControlChannel::new(stream)?;
        let line = control.recv_line(Some(deadline), quit).map_err(|e| match e.kind() {
            io::ErrorKind::Interrupted => anyhow!("stopped"),
            io::ErrorKind::TimedOut => anyhow!("no whole hello: timed out after {}", secs(HELLO_DEADLINE)),
            _ => anyhow!("reading the hello failed: {e}"),
        })?;
        return match decode(&line) {
            Ok(case) => {
                *workload = Some(case.workload());
                if let Some(key) = key {
                    progress(Stage::Challenged);
                    challenge(&mut control, key, deadline, quit, &|| progress(Stage::Answered))?;
                }
                Ok(Greeting::Hello(control, Box::new(case)))
            }
            Err(HelloError::Version(error)) => {
                control.send(&refused(RefusalKind::Version, &error)).ok();
                Err(anyhow!(error))
            }
            Err(HelloError::Malformed(error)) => {
                control.send(&refused(RefusalKind::BadHello, &error)).ok();
                Err(anyhow!(error))
            }
        };
    }
    let mut header = [0u8; DATA_HEADER_LEN];
    read_exact_by(&stream, &mut header, deadline, quit)?;
    let (token, index) = decode_data_header(&header);
    Ok(Greeting::Data(token, index, stream))
}

/// With a pre-shared key: send a nonce, check the answer, refuse with one clear line if it is
/// missing or wrong.
fn challenge(
    control: &mut ControlChannel,
    key: &[u8],
    deadline: Instant,
    quit: &dyn Fn() -> bool,
    answered: &dyn Fn(),
) -> anyhow::Result<()> {
    let nonce = crate::net::auth::nonce();
    control.send(&Control::Challenge { nonce: nonce.clone() })?;
    let line = control
        .recv_line(Some(deadline), quit)
        .map_err(|e| anyhow!("no answer to the key challenge: {e}"))?;
    let (ok, theirs) = match serde_json::from_slice::<Control>(&line) {
        Ok(Control::Auth { mac, nonce: theirs }) => (crate::net::auth::verify(key, &nonce, &mac), theirs),
        _ => (false, None),
    };
    if !ok {
        let error = "refused: wrong or missing pre-shared key (this server was started with --psk-file; give the client the same key with --psk-file)";
        control.send(&refused(RefusalKind::Key, error)).ok();
        bail!("wrong or missing pre-shared key");
    }
    answered();
    // Mutual proof: a client that sent a nonce of its own hears that we hold the key too
    // (only once it proved it does: a client without the key learns nothing).
    if let Some(theirs) = theirs {
        control.send(&Control::Proof {
            mac: crate::net::auth::server_proof(key, &theirs, &nonce),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::session::server::{serve_session_with, ServeOptions};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Every kind travels as the `kind` field of a `refused` line and reads back the same,
    /// beside its text.
    #[test]
    fn every_refusal_kind_round_trips_through_the_control_line() {
        // A kind added to the enum but not to ALL fails to compile here.
        for kind in RefusalKind::ALL {
            match kind {
                RefusalKind::Key
                | RefusalKind::Busy
                | RefusalKind::SessionTooLong
                | RefusalKind::Limits
                | RefusalKind::Kernel
                | RefusalKind::SetUp
                | RefusalKind::Version
                | RefusalKind::BadHello
                | RefusalKind::NotAllowed
                | RefusalKind::TargetKey
                | RefusalKind::Other => {}
            }
        }
        let mut names = std::collections::HashSet::new();
        for kind in RefusalKind::ALL {
            let line = serde_json::to_vec(&refused(kind, "no")).unwrap();
            let text = String::from_utf8(line.clone()).unwrap();
            assert!(text.contains(r#""type":"refused""#), "{text}");
            assert!(names.insert(serde_json::to_string(&kind).unwrap()), "{text}");
            assert_eq!(
                ControlChannel::parse(&line).unwrap(),
                Control::Refused {
                    error: "no".into(),
                    kind
                },
                "{text}"
            );
        }
        assert_eq!(names.len(), 11);
    }

    /// An older peer's refusal has no kind, a newer peer's may have one this version does not
    /// know: both read as `Other`, with the text kept.
    #[test]
    fn a_refusal_without_a_kind_or_of_an_unknown_kind_reads_as_other() {
        let old = br#"{"type":"refused","error":"server busy: another client's session is running"}"#;
        assert_eq!(
            ControlChannel::parse(old).unwrap(),
            Control::Refused {
                error: "server busy: another client's session is running".into(),
                kind: RefusalKind::Other
            }
        );
        let newer = br#"{"type":"refused","error":"over quota","kind":"quota"}"#;
        assert_eq!(
            ControlChannel::parse(newer).unwrap(),
            Control::Refused {
                error: "over quota".into(),
                kind: RefusalKind::Other
            }
        );
    }

    fn stream_hello() -> crate::net::workload::stream::StreamHello {
        use crate::case::{CopyMode, RxMode, StreamCase};
        crate::net::workload::stream::StreamHello::new(
            StreamCase::for_test(CopyMode::OneCopy, 4096).with_rx(RxMode::Copy),
        )
    }

    /// A server with a key: a client with another key is refused by kind (`Key`), one without
    /// a key is told to give one; nothing is served and the server stops when asked.
    #[test]
    fn a_wrong_key_is_refused_by_kind() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        let options = ServeOptions {
            key: Some(b"0123456789abcdef-the-servers-key".to_vec()),
            ..ServeOptions::default()
        };
        std::thread::scope(|scope| {
            let server = scope.spawn(|| {
                serve_session_with(
                    &listener,
                    Some(&stop),
                    &options,
                    crate::net::session::registry::NET_SERVE,
                )
            });
            let ask = |psk: Option<&[u8]>| {
                let mut control = ControlChannel::new(TcpStream::connect(addr).unwrap()).unwrap();
                client_with(
                    &mut control,
                    &stream_hello(),
                    psk,
                    ServerProof::IfOffered,
                    Duration::from_secs(10),
                    Stop::never(),
                )
            };
            let wrong = ask(Some(b"0123456789abcdef-another-key")).unwrap_err();
            assert_eq!(refusal_kind(&wrong), Some(RefusalKind::Key), "{wrong:#}");
            assert!(
                format!("{wrong:#}").starts_with("the server refused: wrong or missing pre-shared key"),
                "{wrong:#}"
            );
            let none = ask(None).unwrap_err();
            assert_eq!(refusal_kind(&none), None, "{none:#}");
            assert!(format!("{none:#}").contains("requires a pre-shared key"), "{none:#}");
            stop.store(true, Ordering::SeqCst);
            assert!(server.join().unwrap().is_err(), "no session was served");
        });
    }

    /// An agent hello, as a server of agent mode decodes it (the tests' clients say it).
    fn agent_hello(line: &[u8]) -> Result<Hello, HelloError> {
        crate::net::session::served::decode_hello(line, &[crate::net::agent::SERVED])
    }

    /// A server that greets with `key` (None: no challenge) and answers `ready`; the client's
    /// outcome with `psk` and `proof`.
    fn mutual(key: Option<&'static [u8]>, psk: Option<&[u8]>, proof: ServerProof) -> anyhow::Result<Ready> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut workload = None;
            if let Ok(Greeting::Hello(mut control, _)) =
                greet(stream, (&|| false, key), &agent_hello, &|_| {}, &mut workload)
            {
                control.send(&Control::Ready { token: 5 }).ok();
            }
        });
        let mut control = ControlChannel::new(TcpStream::connect(addr).unwrap()).unwrap();
        let hello = crate::net::control::AgentHello::default();
        let got = client_with(&mut control, &hello, psk, proof, Duration::from_secs(10), Stop::never());
        drop(control);
        server.join().unwrap();
        got
    }

    /// Mutual proof: a server with the client's key proves it; a server without a key cannot,
    /// and a client that requires the proof refuses it (as `Unproven`, a key failure); one that
    /// does not require it is served as before.
    #[test]
    fn a_client_that_requires_it_hears_the_server_prove_the_key() {
        const KEY: &[u8] = b"0123456789abcdef-the-shared-key";
        let ok = mutual(Some(KEY), Some(KEY), ServerProof::Required).unwrap();
        assert_eq!(ok.token, 5);
        let e = mutual(None, Some(KEY), ServerProof::Required).unwrap_err();
        assert!(e.is::<Unproven>() && key_failure(&e), "{e:#}");
        assert!(format!("{e:#}").contains("did not challenge for a key"), "{e:#}");
        assert!(mutual(None, Some(KEY), ServerProof::IfOffered).is_ok());
        assert!(mutual(None, None, ServerProof::IfOffered).is_ok());
        let e = mutual(Some(KEY), Some(b"0123456789abcdef-another-key"), ServerProof::Required).unwrap_err();
        assert_eq!(refusal_kind(&e), Some(RefusalKind::Key), "{e:#}");
        assert!(key_failure(&e));
    }

    /// A server that answers the challenge's `auth` with a proof it cannot have made (it does
    /// not hold the key) is refused; an older client's `auth` without a nonce is served
    /// without a proof.
    #[test]
    fn a_wrong_proof_is_refused_and_an_old_client_gets_none() {
        const KEY: &[u8] = b"0123456789abcdef-the-shared-key";
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let impostor = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut control = ControlChannel::new(stream).unwrap();
            control
                .recv_line(Some(Instant::now() + Duration::from_secs(10)), &|| false)
                .unwrap();
            control.send(&Control::Challenge { nonce: "00".into() }).unwrap();
            control
                .recv_line(Some(Instant::now() + Duration::from_secs(10)), &|| false)
                .unwrap();
            control.send(&Control::Proof { mac: "ab".repeat(32) }).unwrap();
            control.send(&Control::Ready { token: 1 }).ok();
        });
        let mut control = ControlChannel::new(TcpStream::connect(addr).unwrap()).unwrap();
        let hello = crate::net::control::AgentHello::default();
        let e = client_with(
            &mut control,
            &hello,
            Some(KEY),
            ServerProof::IfOffered,
            Duration::from_secs(10),
            Stop::never(),
        )
        .unwrap_err();
        assert!(e.is::<Unproven>(), "{e:#}");
        impostor.join().unwrap();

        // An old client: its auth has no nonce; the next line it reads is `ready`.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut workload = None;
            if let Ok(Greeting::Hello(mut control, _)) =
                greet(stream, (&|| false, Some(KEY)), &agent_hello, &|_| {}, &mut workload)
            {
                control.send(&Control::Ready { token: 2 }).ok();
            }
        });
        let mut control = ControlChannel::new(TcpStream::connect(addr).unwrap()).unwrap();
        control.send_json(&crate::net::control::AgentHello::default()).unwrap();
        let Control::Challenge { nonce } = control.recv().unwrap() else {
            panic!("no challenge")
        };
        let old = format!(r#"{{"type":"auth","mac":"{}"}}"#, crate::net::auth::answer(KEY, &nonce));
        control
            .send_json(&serde_json::from_str::<serde_json::Value>(&old).unwrap())
            .unwrap();
        assert_eq!(control.recv().unwrap(), Control::Ready { token: 2 });
        server.join().unwrap();
    }

    /// `--allow-peers`: a session's client outside it is refused by kind before anything is
    /// served.
    #[test]
    fn a_client_outside_allow_peers_is_refused_by_kind() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        let options = ServeOptions {
            allow_peers: Some("10.0.0.0/8".parse().unwrap()),
            ..ServeOptions::default()
        };
        std::thread::scope(|scope| {
            let server = scope.spawn(|| {
                serve_session_with(
                    &listener,
                    Some(&stop),
                    &options,
                    crate::net::session::registry::NET_SERVE,
                )
            });
            let mut control = ControlChannel::new(TcpStream::connect(addr).unwrap()).unwrap();
            let e = client(
                &mut control,
                &stream_hello(),
                &Credentials::default(),
                Duration::from_secs(10),
                Stop::never(),
            )
            .unwrap_err();
            assert_eq!(refusal_kind(&e), Some(RefusalKind::NotAllowed), "{e:#}");
            assert!(format!("{e:#}").contains("not 127.0.0.1"), "{e:#}");
            stop.store(true, Ordering::SeqCst);
            assert!(server.join().unwrap().is_err(), "no session was served");
        });
    }
}
