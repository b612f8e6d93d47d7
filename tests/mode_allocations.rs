//! The per-message path of every send and receive mode allocates nothing: request/response
//! at 64 bytes is a few microseconds a transaction, and a malloc/free pair in it would be a
//! measurable part of what `net rr` reports. An allocator that counts this thread's
//! allocations watches ping-pong on a loopback connection, after a warm-up that lets every
//! reusable buffer reach its size.

mod common;

use common::alloc::allocations;
use iopath::case::{CopyMode, RxMode};
use iopath::net::mode::{self, Receiver, SendOptions, Sender};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

#[global_allocator]
static COUNTING: common::alloc::CountingAllocator = common::alloc::CountingAllocator;

const SIZE: usize = 64;
const FIELDS: usize = 4;

/// Messages sent one way and received on the same thread: `rounds` of them, with verify.
fn ping(tx: &mut dyn Sender, rx: &mut dyn Receiver, from: &TcpStream, to: &TcpStream, seqs: std::ops::Range<u64>) {
    for seq in seqs {
        tx.send(from.as_raw_fd(), seq).unwrap();
        assert!(rx.recv(to.as_raw_fd(), seq).unwrap(), "message {seq}");
    }
}

#[test]
fn no_send_or_receive_mode_allocates_per_message() {
    let options = SendOptions {
        unbatched: true,
        ..Default::default()
    };
    let mut checked = Vec::new();
    for send_mode in CopyMode::ALL {
        for rx_mode in RxMode::ALL {
            let verify = rx_mode != RxMode::Trunc;
            let mut tx = match mode::sender_with(send_mode, SIZE, FIELDS, verify, &options) {
                Ok(tx) => tx,
                // A kernel that refuses io_uring: nothing of that mode to measure here.
                Err(e) if mode::unsupported_in(&e).is_some() => {
                    common::skip(&format!("{send_mode}: {e}"));
                    continue;
                }
                Err(e) => panic!("{send_mode}: {e}"),
            };
            let mut rx = mode::receiver(
                rx_mode,
                iopath::case::RxWake::Message,
                SIZE,
                FIELDS,
                verify,
                Default::default(),
            )
            .unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let from = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (to, _) = listener.accept().unwrap();
            from.set_nodelay(true).unwrap();
            to.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            if let Err(e) = rx.attach(to.as_raw_fd()) {
                assert!(mode::unsupported_in(&e).is_some(), "{rx_mode}: {e}");
                common::skip(&format!("{rx_mode}: {e}"));
                continue;
            }
            ping(tx.as_mut(), rx.as_mut(), &from, &to, 0..64);
            let before = allocations();
            ping(tx.as_mut(), rx.as_mut(), &from, &to, 64..1064);
            let during = allocations() - before;
            assert_eq!(
                during, 0,
                "{send_mode} -> {rx_mode}: {during} allocations in 1000 messages"
            );
            tx.drain(from.as_raw_fd(), Duration::from_secs(10)).unwrap();
            if verify {
                let counts = rx.counts();
                assert_eq!(counts.verified_messages, 1064, "{send_mode} -> {rx_mode}");
                assert_eq!(counts.corrupt_messages, 0, "{send_mode} -> {rx_mode}");
            }
            checked.push(format!("{send_mode}->{rx_mode}"));
        }
    }
    // At least every mode that needs no kernel feature beyond TCP was measured.
    for pair in [
        "two-copy->copy",
        "one-copy->scatter",
        "zero-copy->scatter",
        "splice->trunc",
    ] {
        assert!(checked.iter().any(|c| c == pair), "{pair} not checked: {checked:?}");
    }
}
