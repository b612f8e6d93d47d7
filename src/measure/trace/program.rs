//! The trace probe's eBPF programs, written as instructions here (no clang at build time):
//! each runs in the kernel on every event of one tracepoint and adds what the event says
//! to the entry of the thread it belongs to (a hash map by thread id, only threads of this
//! process) or of its CPU (an array by CPU), so nothing is written per event but a few sums.
//! The record's fields are read at the offsets the event's tracefs `format` gives.

use super::Field;
use crate::sys::bpf::Insn;

/// The per-thread entry: twelve u64, at these byte offsets.
pub const COPY_CALLS: i16 = 0;
pub const COPY_BYTES: i16 = 8;
pub const SENDMSG_CALLS: i16 = 16;
pub const SEND_BYTES: i16 = 24;
pub const SOFTIRQ_RX_NS: i16 = 32;
pub const SOFTIRQ_TX_NS: i16 = 40;
pub const VOLUNTARY: i16 = 48;
pub const INVOLUNTARY: i16 = 56;
pub const OFF_CPU_NS: i16 = 64;
pub const WAKEUPS: i16 = 72;
/// When the thread last left its CPU (CLOCK_MONOTONIC ns), 0 while it runs.
pub const OFF_SINCE: i16 = 80;
/// 1 while the thread is asleep (it left its CPU voluntarily and has not run since).
pub const ASLEEP: i16 = 88;
pub const THREAD_VALUE: usize = 96;

/// The per-CPU entry: four u64.
pub const ENTRY_NS: i16 = 0;
pub const ENTRY_VEC: i16 = 8;
pub const CPU_RX_NS: i16 = 16;
pub const CPU_TX_NS: i16 = 24;
pub const CPU_VALUE: usize = 32;

pub const NET_TX_SOFTIRQ: i32 = 2;
pub const NET_RX_SOFTIRQ: i32 = 3;

// Registers: r0 return value, r1-r5 arguments (clobbered by calls), r6-r9 kept, r10 frame.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const R9: u8 = 9;
const FP: u8 = 10;

// Helper function ids (include/uapi/linux/bpf.h).
const MAP_LOOKUP_ELEM: i32 = 1;
const MAP_UPDATE_ELEM: i32 = 2;
const KTIME_GET_NS: i32 = 5;
const GET_SMP_PROCESSOR_ID: i32 = 8;
const GET_CURRENT_PID_TGID: i32 = 14;
const BPF_NOEXIST: i32 = 1;

/// Where the key (a u32) lives on the stack, and the zero entry made for a new thread.
const KEY_AT: i16 = -4;
const ZERO_AT: i16 = -(8 + THREAD_VALUE as i16);

/// A jump target, placed with [`Asm::here`].
#[derive(Debug, Clone, Copy)]
struct Label(usize);

/// Instructions with forward jumps to labels, resolved by [`Asm::finish`].
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    jumps: Vec<(usize, Label)>,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// An access's size bits (BPF_W, BPF_H, BPF_B, BPF_DW) for a field `size` bytes wide.
fn size_bits(size: usize) -> u8 {
    match size {
        1 => 0x10,
        2 => 0x08,
        4 => 0x00,
        _ => 0x18,
    }
}

impl Asm {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn here(&mut self, l: Label) {
        self.labels[l.0] = Some(self.insns.len());
    }

    fn push(&mut self, i: Insn) {
        self.insns.push(i);
    }

    fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.push(insn(0xb7, dst, 0, 0, imm));
    }
    fn mov(&mut self, dst: u8, src: u8) {
        self.push(insn(0xbf, dst, src, 0, 0));
    }
    fn add_imm(&mut self, dst: u8, imm: i32) {
        self.push(insn(0x07, dst, 0, 0, imm));
    }
    fn sub(&mut self, dst: u8, src: u8) {
        self.push(insn(0x1f, dst, src, 0, 0));
    }
    fn rsh_imm(&mut self, dst: u8, imm: i32) {
        self.push(insn(0x77, dst, 0, 0, imm));
    }
    fn and_imm(&mut self, dst: u8, imm: i32) {
        self.push(insn(0x57, dst, 0, 0, imm));
    }
    /// dst = *(size *)(src + off).
    fn load(&mut self, size: usize, dst: u8, src: u8, off: i16) {
        self.push(insn(0x61 | size_bits(size), dst, src, off, 0));
    }
    /// *(size *)(dst + off) = src.
    fn store(&mut self, size: usize, dst: u8, off: i16, src: u8) {
        self.push(insn(0x63 | size_bits(size), dst, src, off, 0));
    }
    /// *(u64 *)(dst + off) = imm.
    fn store_imm(&mut self, dst: u8, off: i16, imm: i32) {
        self.push(insn(0x7a, dst, 0, off, imm));
    }
    /// *(u64 *)(dst + off) += src, atomically.
    fn atomic_add(&mut self, dst: u8, off: i16, src: u8) {
        self.push(insn(0xdb, dst, src, off, 0));
    }
    /// *(u64 *)(dst + off) += 1, atomically (r1 clobbered).
    fn count(&mut self, dst: u8, off: i16) {
        self.mov_imm(R1, 1);
        self.atomic_add(dst, off, R1);
    }
    fn call(&mut self, helper: i32) {
        self.push(insn(0x85, 0, 0, 0, helper));
    }
    fn load_map(&mut self, dst: u8, map_fd: i32) {
        // BPF_LD | BPF_IMM | BPF_DW with src BPF_PSEUDO_MAP_FD: the map's address, two slots.
        self.push(insn(0x18, dst, 1, 0, map_fd));
        self.push(insn(0, 0, 0, 0, 0));
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(insn(code, dst, src, 0, imm));
    }
    fn goto(&mut self, to: Label) {
        self.jump(0x05, 0, 0, 0, to);
    }
    fn if_eq(&mut self, dst: u8, imm: i32, to: Label) {
        self.jump(0x15, dst, 0, imm, to);
    }
    fn if_ne(&mut self, dst: u8, imm: i32, to: Label) {
        self.jump(0x55, dst, 0, imm, to);
    }
    /// Signed dst < imm.
    fn if_slt(&mut self, dst: u8, imm: i32, to: Label) {
        self.jump(0xc5, dst, 0, imm, to);
    }

    /// dst = the record's field (ctx in r6), sign-extended when the field is signed.
    fn field(&mut self, dst: u8, f: &Field) {
        self.load(f.size, dst, R6, f.offset as i16);
        if f.signed && f.size < 8 {
            let shift = 64 - 8 * f.size as i32;
            self.push(insn(0x67, dst, 0, 0, shift)); // lsh
            self.push(insn(0xc7, dst, 0, 0, shift)); // arsh
        }
    }

    /// Continue only for a thread of process `tgid`: r7 = its pid_tgid (the thread id in the
    /// low half); otherwise jump to `other`.
    fn only_process(&mut self, tgid: u32, other: Label) {
        self.call(GET_CURRENT_PID_TGID);
        self.mov(R7, R0);
        self.rsh_imm(R0, 32);
        self.if_ne(R0, tgid as i32, other);
    }

    /// r0 = the entry of thread r7 (low 32 bits), made zero when missing; jump to `full`
    /// when the map has no room.
    fn thread_entry(&mut self, threads: i32, full: Label) {
        let have = self.label();
        self.store(4, FP, KEY_AT, R7);
        self.lookup(threads);
        self.if_ne(R0, 0, have);
        for i in 0..(THREAD_VALUE as i16 / 8) {
            self.store_imm(FP, ZERO_AT + 8 * i, 0);
        }
        self.load_map(R1, threads);
        self.mov(R2, FP);
        self.add_imm(R2, KEY_AT as i32);
        self.mov(R3, FP);
        self.add_imm(R3, ZERO_AT as i32);
        self.mov_imm(R4, BPF_NOEXIST);
        self.call(MAP_UPDATE_ELEM);
        self.lookup(threads);
        self.if_eq(R0, 0, full);
        self.here(have);
    }

    /// r0 = map_lookup_elem(map, the key at KEY_AT).
    fn lookup(&mut self, map: i32) {
        self.load_map(R1, map);
        self.mov(R2, FP);
        self.add_imm(R2, KEY_AT as i32);
        self.call(MAP_LOOKUP_ELEM);
    }

    fn finish(mut self) -> Vec<Insn> {
        for (at, to) in std::mem::take(&mut self.jumps) {
            let target = self.labels[to.0].expect("every label placed");
            self.insns[at].off = (target as i64 - at as i64 - 1) as i16;
        }
        self.insns
    }

    /// The common end: return 1, so the event still reaches every other perf event of the
    /// tracepoint (0 would hide it from them: `perf record` beside iopath would see nothing);
    /// the probe's own event stays disabled, so nothing is recorded for it.
    fn exit_at(&mut self, l: Label) {
        self.here(l);
        self.mov_imm(R0, 1);
        self.push(insn(0x95, 0, 0, 0, 0));
    }
}

/// The maps the programs write, by descriptor, and the process whose threads they follow.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub threads: i32,
    pub cpus: i32,
    pub tgid: u32,
}

/// A program adding the record's field `value`, when it is at least `least`, to the current
/// thread's `sum` (and one to its `calls`, when given), for a thread of this process.
fn add_to_thread(t: Target, value: &Field, least: i32, calls: Option<i16>, sum: i16) -> Vec<Insn> {
    let mut a = Asm::default();
    let exit = a.label();
    a.mov(R6, R1);
    a.only_process(t.tgid, exit);
    a.field(R8, value);
    a.if_slt(R8, least, exit);
    a.thread_entry(t.threads, exit);
    if let Some(calls) = calls {
        a.count(R0, calls);
    }
    a.atomic_add(R0, sum, R8);
    a.exit_at(exit);
    a.finish()
}

/// skb:skb_copy_datagram_iovec: one receive copy of `len` bytes by the current thread.
pub fn receive_copy(t: Target, len: &Field) -> Vec<Insn> {
    add_to_thread(t, len, 0, Some(COPY_CALLS), COPY_BYTES)
}

/// tcp:tcp_sendmsg_locked: one call of the TCP send path by the current thread.
pub fn sendmsg_call(t: Target) -> Vec<Insn> {
    let mut a = Asm::default();
    let exit = a.label();
    a.mov(R6, R1);
    a.only_process(t.tgid, exit);
    a.thread_entry(t.threads, exit);
    a.count(R0, SENDMSG_CALLS);
    a.exit_at(exit);
    a.finish()
}

/// sock:sock_send_length: `ret` bytes sent by the current thread (an error is not a length).
pub fn send_length(t: Target, ret: &Field) -> Vec<Insn> {
    add_to_thread(t, ret, 1, None, SEND_BYTES)
}

/// r0 = this CPU's entry (key on the stack); jump to `none` when there is none.
fn cpu_entry(a: &mut Asm, cpus: i32, none: Label) {
    a.call(GET_SMP_PROCESSOR_ID);
    a.store(4, FP, KEY_AT, R0);
    a.lookup(cpus);
    a.if_eq(R0, 0, none);
}

/// irq:softirq_entry: this CPU starts the softirq `vec` now, when it is NET_RX or NET_TX (the
/// others are not timed: their exits find no start).
pub fn softirq_entry(t: Target, vec: &Field) -> Vec<Insn> {
    let mut a = Asm::default();
    let (exit, net) = (a.label(), a.label());
    a.mov(R6, R1);
    a.field(R8, vec);
    a.if_eq(R8, NET_RX_SOFTIRQ, net);
    a.if_ne(R8, NET_TX_SOFTIRQ, exit);
    a.here(net);
    cpu_entry(&mut a, t.cpus, exit);
    a.mov(R9, R0);
    a.call(KTIME_GET_NS);
    a.store(8, R9, ENTRY_NS, R0);
    a.store(8, R9, ENTRY_VEC, R8);
    a.exit_at(exit);
    a.finish()
}

/// irq:softirq_exit: the softirq begun on this CPU ends; its time goes to the CPU's NET_RX
/// or NET_TX sum and to the thread it interrupted (the current one), when it is ours.
pub fn softirq_exit(t: Target) -> Vec<Insn> {
    let mut a = Asm::default();
    let (exit, rx, tx) = (a.label(), a.label(), a.label());
    cpu_entry(&mut a, t.cpus, exit);
    a.mov(R9, R0);
    a.load(8, R8, R9, ENTRY_NS);
    a.if_eq(R8, 0, exit);
    a.store_imm(R9, ENTRY_NS, 0);
    a.call(KTIME_GET_NS);
    a.sub(R0, R8);
    a.mov(R6, R0);
    a.load(8, R8, R9, ENTRY_VEC);
    a.if_eq(R8, NET_RX_SOFTIRQ, rx);
    a.if_eq(R8, NET_TX_SOFTIRQ, tx);
    a.goto(exit);
    for (at, cpu_sum, thread_sum) in [(rx, CPU_RX_NS, SOFTIRQ_RX_NS), (tx, CPU_TX_NS, SOFTIRQ_TX_NS)] {
        a.here(at);
        a.atomic_add(R9, cpu_sum, R6);
        a.only_process(t.tgid, exit);
        a.thread_entry(t.threads, exit);
        a.atomic_add(R0, thread_sum, R6);
        a.goto(exit);
    }
    a.exit_at(exit);
    a.finish()
}

/// sched:sched_switch: the thread leaving (the current one, when ours) counts a voluntary or
/// involuntary switch and when it left; the thread arriving (when it has an entry) adds the
/// time it was off CPU, and a wakeup when it had left asleep.
pub fn sched_switch(t: Target, prev_state: &Field, next_pid: &Field) -> Vec<Insn> {
    let mut a = Asm::default();
    let (exit, next, involuntary, stamp) = (a.label(), a.label(), a.label(), a.label());
    a.mov(R6, R1);
    a.call(KTIME_GET_NS);
    a.mov(R9, R0);
    a.only_process(t.tgid, next);
    a.thread_entry(t.threads, next);
    a.field(R8, prev_state);
    // Any TASK_REPORT bit (S, D, ...): it gave the CPU up; 0 or TASK_REPORT_MAX: taken off.
    a.and_imm(R8, 0xff);
    a.if_eq(R8, 0, involuntary);
    a.count(R0, VOLUNTARY);
    a.store_imm(R0, ASLEEP, 1);
    a.goto(stamp);
    a.here(involuntary);
    a.count(R0, INVOLUNTARY);
    a.store_imm(R0, ASLEEP, 0);
    a.here(stamp);
    a.store(8, R0, OFF_SINCE, R9);
    a.here(next);
    a.field(R8, next_pid);
    a.store(4, FP, KEY_AT, R8);
    a.lookup(t.threads);
    a.if_eq(R0, 0, exit);
    let woke = a.label();
    a.load(8, R7, R0, OFF_SINCE);
    a.if_eq(R7, 0, woke);
    a.store_imm(R0, OFF_SINCE, 0);
    a.mov(R1, R9);
    a.sub(R1, R7);
    a.atomic_add(R0, OFF_CPU_NS, R1);
    a.here(woke);
    a.load(8, R7, R0, ASLEEP);
    a.if_eq(R7, 0, exit);
    a.store_imm(R0, ASLEEP, 0);
    a.count(R0, WAKEUPS);
    a.exit_at(exit);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forward jumps land where their labels were placed.
    #[test]
    fn jumps_are_resolved_to_their_labels() {
        let mut a = Asm::default();
        let end = a.label();
        a.if_eq(R1, 0, end);
        a.mov_imm(R0, 1);
        a.load_map(R1, 3);
        a.exit_at(end);
        let insns = a.finish();
        assert_eq!(insns[0].off, 3, "over the mov and the two slots of the map load");
        assert_eq!(insns[2].regs, 1 | (1 << 4));
        assert_eq!(insns.last().unwrap().code, 0x95);
    }
}
