#!/usr/bin/env bash
# The trace probe's cost and the softirq share per role (issue 35's acceptance): a 64 KiB
# two-copy stream and a 64 B two-copy rr over loopback, client pinned to CPU 0 and server to
# CPU 1, alternating IOPATH_TRACE=on and IOPATH_TRACE=off (on/off in odd rounds, off/on in
# even ones, so neither side always runs first). Prints each run's throughput or rr p50, the
# medians and their ratio on/off, and from the "on" runs each role's softirq_share,
# softirq_net_rx_s + softirq_net_tx_s and sched_wakeups.
#
# Run as root (system-wide tracepoints) on a quiet machine, with a release build:
#   cargo build --release && sudo scripts/trace_softirq.sh
# Settings (environment): BIN (target/release/iopath), ROUNDS (6), DURATION (2s),
# WARMUP (300ms), OUT (a temporary folder; every run's JSON is kept there).
set -euo pipefail

BIN=${BIN:-target/release/iopath}
ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-2s}
WARMUP=${WARMUP:-300ms}
OUT=${OUT:-$(mktemp -d /tmp/trace_softirq.XXXXXX)}
mkdir -p "$OUT"

[ -x "$BIN" ] || { echo "no executable $BIN (cargo build --release, or set BIN)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to read the JSON records" >&2; exit 2; }
[ "$(id -u)" = 0 ] || echo "warning: not root: the 'on' runs' trace figures will be unavailable" >&2

PIN=(--client-cpus 0 --server-cpus 1)
COMMON=(--mode two-copy --duration "$DURATION" --warmup "$WARMUP" --json "${PIN[@]}")
STREAM=(net stream --rx-mode copy --size 64K "${COMMON[@]}")
RR=(net rr --request-size 64 --response-size 64 "${COMMON[@]}")

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure: $(head -1 /proc/pressure/cpu 2>/dev/null || echo n/a)"
echo "binary: $BIN; $ROUNDS rounds, $DURATION windows after $WARMUP warm-up; JSON in $OUT"

run() { # run KIND STATE ROUND
    local kind=$1 state=$2 round=$3 file="$OUT/$1-$2-$3.json"
    local args
    if [ "$kind" = stream ]; then args=("${STREAM[@]}"); else args=("${RR[@]}"); fi
    IOPATH_TRACE=$state "$BIN" "${args[@]}" >"$file" 2>"$OUT/$kind-$state-$round.err" || {
        echo "round $round $kind $state failed:" >&2
        cat "$OUT/$kind-$state-$round.err" >&2
        exit 1
    }
}

for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order=(on off); else order=(off on); fi
    for kind in stream rr; do
        for state in "${order[@]}"; do
            run "$kind" "$state" "$round"
        done
    done
    echo "round $round done ($(cut -d' ' -f1 /proc/loadavg) load)"
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys

out, rounds = sys.argv[1], int(sys.argv[2])

def record(kind, state, r):
    with open(f"{out}/{kind}-{state}-{r}.json") as f:
        return json.load(f)[0]

def metric(rec, role, name):
    for m in rec["observation"]["metrics"]:
        if m["role"] == role and m["name"] == name:
            return m
    return None

def value(rec, role, name):
    m = metric(rec, role, name)
    return None if m is None else m.get("value")

def why(rec, role, name):
    m = metric(rec, role, name)
    return "absent" if m is None else m.get("source")

figures = [("stream", "system", "throughput_gbps", "Gbit/s"), ("rr", "client", "latency_p50_us", "p50 us")]
for kind, role, name, unit in figures:
    print(f"\n{kind}: {name} ({unit}) per round")
    print(f"{'round':>5}  {'on':>10}  {'off':>10}  {'on/off':>7}")
    ons, offs = [], []
    for r in range(1, rounds + 1):
        on, off = value(record(kind, "on", r), role, name), value(record(kind, "off", r), role, name)
        ratio = f"{on / off:.3f}" if on and off else "-"
        show = lambda v: "-" if v is None else f"{v:.3f}"
        # A missing figure says why (an error, or the metric's own reason).
        notes = []
        for state, v in (("on", on), ("off", off)):
            if v is None:
                rec = record(kind, state, r)
                notes.append(f"{state}: {rec.get('error') or why(rec, role, name)}")
        print(f"{r:>5}  {show(on):>10}  {show(off):>10}  {ratio:>7}  {'; '.join(notes)}")
        if on is not None and off is not None:
            ons.append(on)
            offs.append(off)
    if ons:
        mon, moff = statistics.median(ons), statistics.median(offs)
        print(f"median on {mon:.3f}, off {moff:.3f}, on/off {mon / moff:.3f}")
    else:
        print("no pair with both figures")

print("\nsoftirq share per role, the 'on' runs (NET_RX + NET_TX softirq charged to the role's threads / their time on CPU)")
print(f"{'kind':<6} {'round':>5} {'role':<7} {'share':>7} {'net_rx s':>9} {'net_tx s':>9} {'wakeups':>8}  note")
shares = {}
for kind in ("stream", "rr"):
    for r in range(1, rounds + 1):
        rec = record(kind, "on", r)
        for role in ("client", "server"):
            share = value(rec, role, "softirq_share")
            rx = value(rec, role, "softirq_net_rx_s")
            tx = value(rec, role, "softirq_net_tx_s")
            wake = value(rec, role, "sched_wakeups")
            fmt = lambda v, spec: "-" if v is None else format(v, spec)
            note = "; ".join(f"{n}: {why(rec, role, n)}" for n, v in (("softirq_share", share), ("sched_wakeups", wake)) if v is None)
            print(f"{kind:<6} {r:>5} {role:<7} {fmt(share, '.3f'):>7} {fmt(rx, '.4f'):>9} {fmt(tx, '.4f'):>9} {fmt(wake, '.0f'):>8}  {note}")
            if share is not None:
                shares.setdefault((kind, role), []).append(share)
for (kind, role), v in sorted(shares.items()):
    print(f"median softirq_share {kind} {role}: {statistics.median(v):.3f} ({len(v)} runs, {min(v):.3f}-{max(v):.3f})")
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
