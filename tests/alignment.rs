//! Every buffer the kernel copies into or out of starts where `--align` says: on a page
//! boundary by default, 16 bytes past one with `misaligned`. The kernel's copy between user
//! memory and its pages can be many times slower when the two are mutually misaligned, so a
//! buffer that drifts (a new `vec!` in a mode) would change what is measured; each sender and
//! receiver lists its buffers (`buffers()`), and this holds their placement.

use iopath::case::{Align, CopyMode, RxMode};
use iopath::net::message::placed_as;
use iopath::net::mode::{self, SendOptions};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

const SIZE: usize = 256 << 10;

fn page() -> usize {
    iopath::sys::mem::page_size()
}

/// The buffers of a page or more (the splice ring packs smaller fields, which the slow copy
/// does not concern) are placed as asked; returns how many were checked.
fn check(what: &str, buffers: &[(usize, usize)], align: Align) -> usize {
    let big: Vec<_> = buffers.iter().filter(|(_, len)| *len >= page()).collect();
    for (addr, len) in &big {
        assert!(
            placed_as(*addr, align),
            "{what} --align {align}: a buffer of {len} bytes at {addr:#x}"
        );
    }
    big.len()
}

#[test]
fn every_send_mode_places_its_buffers_as_asked() {
    for align in [Align::Page, Align::Misaligned] {
        for send_mode in CopyMode::ALL {
            for fields in [1, 4] {
                for verify in [false, true] {
                    for fixed_buffers in [false, true] {
                        if fixed_buffers && send_mode != CopyMode::UringZc {
                            continue;
                        }
                        let options = SendOptions {
                            align,
                            fixed_buffers,
                            ..Default::default()
                        };
                        let tx = match mode::sender_with(send_mode, SIZE, fields, verify, &options) {
                            Ok(tx) => tx,
                            // A kernel that refuses io_uring, or a memlock limit too low to
                            // register the fixed buffer: nothing of that mode to hold here.
                            Err(e) if mode::unsupported_in(&e).is_some() => continue,
                            Err(e) => panic!("{send_mode}: {e}"),
                        };
                        let what = format!("{send_mode} fields={fields} verify={verify} fixed={fixed_buffers}");
                        let checked = check(&what, &tx.buffers(), align);
                        // sendfile sends file pages: no user buffer. Every other mode has some.
                        assert_eq!(
                            checked == 0,
                            send_mode == CopyMode::Sendfile,
                            "{what}: {checked} buffers"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_receive_mode_places_its_buffers_as_asked() {
    for align in [Align::Page, Align::Misaligned] {
        for rx_mode in RxMode::ALL {
            for fields in [1, 4] {
                for verify in [false, true] {
                    let rx =
                        mode::receiver(rx_mode, iopath::case::RxWake::Message, SIZE, fields, verify, align).unwrap();
                    let what = format!("{rx_mode} fields={fields} verify={verify}");
                    let checked = check(&what, &rx.buffers(), align);
                    // trunc copies nothing; every other mode has a buffer the kernel fills.
                    assert_eq!(checked == 0, rx_mode == RxMode::Trunc, "{what}: {checked} buffers");
                }
            }
        }
    }
}

/// Misaligned buffers still carry every message intact, in every mode that copies.
#[test]
fn misaligned_buffers_carry_messages_intact() {
    for send_mode in [CopyMode::TwoCopy, CopyMode::OneCopy, CopyMode::Splice] {
        for rx_mode in [RxMode::Copy, RxMode::Scatter] {
            let options = SendOptions {
                align: Align::Misaligned,
                ..Default::default()
            };
            let mut tx = mode::sender_with(send_mode, SIZE, 3, true, &options).unwrap();
            let mut rx =
                mode::receiver(rx_mode, iopath::case::RxWake::Message, SIZE, 3, true, Align::Misaligned).unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let from = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (to, _) = listener.accept().unwrap();
            to.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            from.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for seq in 0..5 {
                        tx.send(from.as_raw_fd(), seq).unwrap();
                    }
                });
                for seq in 0..5 {
                    assert!(
                        rx.recv(to.as_raw_fd(), seq).unwrap(),
                        "{send_mode}/{rx_mode} message {seq}"
                    );
                }
            });
            let counts = rx.counts();
            assert_eq!(
                (counts.verified_messages, counts.corrupt_messages),
                (5, 0),
                "{send_mode}/{rx_mode}"
            );
        }
    }
}
