#!/usr/bin/env bash
# Kernel headlines (issue 36): the three published claims iopath re-measures on one machine,
# each printed with iopath's own finding ("reproduced", "not reproduced here: …", "cannot
# decide: …", report/claims.rs) under its table; then the path where zero copy is not copied
# (36.4, its finding too) and sendfile next to iperf3 -Z (36.5, scripts/sendfile_vs_iperf3.sh:
# the median per-round ratio, its interval and a verdict). docs/benchmarks.md, "Kernel
# headlines (issue 36)", "Issue 36.4" and "Issue 36.5", hold the published figures beside these.
#
#   scripts/headlines.sh [REPS]      (default 6 repetitions a side; root for the namespaces)
#
# Release binary, client on CPU 0 and server on CPU 1, the two sides alternated A B A B
# (repetition-major cells; `iopath ab`'s ABBA pairs for BIG TCP). About 12 minutes at 6
# repetitions: 19 measured configurations x 6 x (3 s window + 1 s warm-up), plus set-up, and
# 36.5's 6 rounds of 3 x 6 s (iperf3 needed; SENDFILE=0 leaves it out).
# Run it on a quiet machine: the figures are only as honest as the machine is idle.
# The veth topologies put the pair's client end in the namespace the script runs in; to leave
# the host's untouched, run it in a network namespace of its own (loopback up, built first):
#   cargo build --release && unshare --net sh -c \
#       'ip link set lo up && IOPATH=target/release/iopath exec scripts/headlines.sh 6'
set -euo pipefail

# IOPATH=path and DURATION/WARMUP override the binary and the window (a smoke test of the
# script itself: IOPATH=target/debug/iopath DURATION=300ms WARMUP=100ms scripts/headlines.sh 1).
REPS=${1:-6}
cd "$(dirname "$0")/.."
if [ -z "${IOPATH:-}" ]; then
    cargo build --release --quiet
    IOPATH=$PWD/target/release/iopath
fi
OUT=$(mktemp -d /tmp/iopath-headlines.XXXXXX)
WINDOW=(--duration "${DURATION:-3s}" --warmup "${WARMUP:-1s}" --client-cpus 0 --server-cpus 1 --reps "$REPS")
echo "databases in $OUT"

# 1. UDP GSO (udpgso_bench cover letter, 2018): send vs gso, 1472-byte datagrams, gso's calls
#    carrying 44 of them (64 KB, as the benchmark's), unpaced. Bytes per CPU-second and per
#    cycle (where a PMU counts them), calls per second.
echo "== 1. UDP GSO: net udp-stream --mode send,gso"
"$IOPATH" net udp-stream --mode send,gso --size 1472 --batch 44 "${WINDOW[@]}" \
    --db "$OUT/udp-gso.db" --wide

# 2. BIG TCP (LWN, 2022): TCP_RR with 80 KB requests and responses over a veth pair, both
#    ends' gso/gro sizes 64 KiB (A) against 185000 (B), the IPv4 variants too (the pair's
#    addresses are IPv4: Linux 6.3+ reads gso_ipv4_max_size for them). Then a 1 MiB stream.
# `--set dev:END:LIMIT=185000` for both ends and each LIMIT named, into the array SETS.
big_tcp_sets() {
    SETS=()
    local limit end
    for limit in "$@"; do
        for end in server client; do
            SETS+=(--set "dev:$end:$limit=185000")
        done
    done
}
big_tcp_sets gso_max_size gro_max_size gso_ipv4_max_size gro_ipv4_max_size
echo "== 2a. BIG TCP: net rr 80000/80000 over veth, 64K (A) vs 185000 (B)"
"$IOPATH" ab "${SETS[@]}" --db "$OUT/big-tcp-rr.db" -- \
    net rr --topology veth --mode one-copy --request-size 80000 --response-size 80000 "${WINDOW[@]}"
echo "== 2b. BIG TCP: net stream 1 MiB over veth, 64K (A) vs 185000 (B)"
"$IOPATH" ab "${SETS[@]}" --db "$OUT/big-tcp-stream.db" -- \
    net stream --topology veth --mode one-copy --size 1M "${WINDOW[@]}"
# Over IPv6, the addresses of the 2022 series, the kernel reads gso_max_size/gro_max_size (the
# IPv4 variants are not needed): the same rr over veth:ipv6.
big_tcp_sets gso_max_size gro_max_size
echo "== 2c. BIG TCP over IPv6: net rr 80000/80000 over veth:ipv6, 64K (A) vs 185000 (B)"
"$IOPATH" ab "${SETS[@]}" --db "$OUT/big-tcp-rr-ipv6.db" -- \
    net rr --topology veth:ipv6 --mode one-copy --request-size 80000 --response-size 80000 "${WINDOW[@]}"
# Per side (client, server): CPU per transaction (cpu_us_per_txn, rr) and cycles per byte (PMU,
# else an estimate from CPU time) beside the throughput, for the rr and the 1 MiB stream.
for db in big-tcp-rr big-tcp-stream big-tcp-rr-ipv6; do
    echo "-- $db: medians [95% interval] per variant and side; link_rx_bytes_per_packet proves the sizes took effect"
    "$IOPATH" report 1 --db "$OUT/$db.db" --format summary | jq -r '
        .cells[] | .label as $l | .metrics[]
        | select(.metric | test("^(transactions_per_s|throughput_gbps|latency_p99_us|cpu_us_per_txn|cycles_per_byte|cpu_user_s|cpu_sys_s|link_rx_bytes_per_packet)$"))
        | "\($l)  \(.role) \(.metric) \(.median) \(.ci95 // "no interval") (\(.source))"'
done

# 3. MSG_ZEROCOPY over veth (the 2017 commit's msg_zerocopy.sh 4 tcp): one-copy vs zero-copy,
#    the receiver truncating. The finding gives the copied fraction as its reason.
echo "== 3. MSG_ZEROCOPY over veth: net stream --mode one-copy,zero-copy --rx-mode trunc"
"$IOPATH" net stream --topology veth --mode one-copy,zero-copy --rx-mode trunc --size 64K \
    "${WINDOW[@]}" --db "$OUT/zerocopy-veth.db" --wide

# 4. A path where zero copy is not copied (issue 36.4): UDP into a veth whose peer drops every
#    datagram at ingress (tc cls_bpf), so nothing is delivered locally and the kernel does not
#    copy a MSG_ZEROCOPY or SEND_ZC send. 60000-byte datagrams (MTU 65535) and 1400-byte ones;
#    the finding under each table gives the copied fraction and the client's CPU per datagram
#    against send's, with its interval. Then the same 60000 B where the peer receives (copied).
echo "== 4a. zero copy not copied: net udp-stream --topology veth:mtu=65535,peer=drop --size 60000"
"$IOPATH" net udp-stream --topology veth:mtu=65535,peer=drop --mode send,zerocopy,uring-zc --size 60000 \
    "${WINDOW[@]}" --db "$OUT/zc-not-copied.db" --wide
echo "== 4b. the same at 1400 B: net udp-stream --topology veth:peer=drop --size 1400"
"$IOPATH" net udp-stream --topology veth:peer=drop --mode send,zerocopy,uring-zc --size 1400 \
    "${WINDOW[@]}" --db "$OUT/zc-not-copied.db" --wide
echo "== 4c. where the peer receives: net udp-stream --topology veth:mtu=65535 --size 60000"
"$IOPATH" net udp-stream --topology veth:mtu=65535 --mode send,zerocopy,uring-zc --size 60000 \
    "${WINDOW[@]}" --db "$OUT/zc-not-copied.db" --wide

# 5. sendfile 128 KiB next to iperf3 -Z (issue 36.5), over loopback: REPS alternated rounds,
#    the median per-round ratio with its order-statistic interval and the verdict.
#    SENDFILE_DURATION/SENDFILE_WARMUP: whole seconds (default 5 and 1).
if [ "${SENDFILE:-1}" = 0 ]; then
    echo "== 5. sendfile vs iperf3 -Z: left out (SENDFILE=0)"
elif ! command -v iperf3 >/dev/null; then
    echo "== 5. sendfile vs iperf3 -Z: skipped, iperf3 is not installed"
else
    echo "== 5. sendfile 128 KiB vs iperf3 -Z: scripts/sendfile_vs_iperf3.sh, $REPS rounds"
    ROUNDS=$REPS DURATION=${SENDFILE_DURATION:-5} WARMUP=${SENDFILE_WARMUP:-1} \
        scripts/sendfile_vs_iperf3.sh "$IOPATH"
fi
