#!/usr/bin/env bash
# Kernel headlines (issue 36): the three published claims iopath re-measures on one machine,
# each printed with iopath's own finding ("reproduced", "not reproduced here: …", "cannot
# decide: …", report/claims.rs) under its table. docs/benchmarks.md, "Kernel headlines (issue
# 36)", holds the published figures beside these.
#
#   scripts/headlines.sh [REPS]      (default 6 repetitions a side; root for the namespaces)
#
# Release binary, client on CPU 0 and server on CPU 1, the two sides alternated A B A B
# (repetition-major cells; `iopath ab`'s ABBA pairs for BIG TCP). About 5 minutes at 6
# repetitions: 8 measured configurations x 6 x (3 s window + 1 s warm-up), plus set-up.
# Run it on a quiet machine: the figures are only as honest as the machine is idle.
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
SETS=()
for limit in gso_max_size gro_max_size gso_ipv4_max_size gro_ipv4_max_size; do
    for end in server client; do
        SETS+=(--set "dev:$end:$limit=185000")
    done
done
echo "== 2a. BIG TCP: net rr 80000/80000 over veth, 64K (A) vs 185000 (B)"
"$IOPATH" ab "${SETS[@]}" --db "$OUT/big-tcp-rr.db" -- \
    net rr --topology veth --mode one-copy --request-size 80000 --response-size 80000 "${WINDOW[@]}"
echo "== 2b. BIG TCP: net stream 1 MiB over veth, 64K (A) vs 185000 (B)"
"$IOPATH" ab "${SETS[@]}" --db "$OUT/big-tcp-stream.db" -- \
    net stream --topology veth --mode one-copy --size 1M "${WINDOW[@]}"
for db in big-tcp-rr big-tcp-stream; do
    echo "-- $db: medians [95% interval] per variant and side; link_rx_bytes_per_packet proves the sizes took effect"
    "$IOPATH" export 1 --db "$OUT/$db.db" --format summary | jq -r '
        .cells[] | .label as $l | .metrics[]
        | select(.metric | test("^(transactions_per_s|throughput_gbps|latency_p99_us|cycles_per_byte|cpu_user_s|cpu_sys_s|link_rx_bytes_per_packet)$"))
        | "\($l)  \(.role) \(.metric) \(.median) \(.ci95 // "no interval") (\(.source))"'
done

# 3. MSG_ZEROCOPY over veth (the 2017 commit's msg_zerocopy.sh 4 tcp): one-copy vs zero-copy,
#    the receiver truncating. The finding gives the copied fraction as its reason.
echo "== 3. MSG_ZEROCOPY over veth: net stream --mode one-copy,zero-copy --rx-mode trunc"
"$IOPATH" net stream --topology veth --mode one-copy,zero-copy --rx-mode trunc --size 64K \
    "${WINDOW[@]}" --db "$OUT/zerocopy-veth.db" --wide
