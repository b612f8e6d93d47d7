#!/usr/bin/env bash
# The power and the false alarms of `iopath ab` interleaving, on a shaped veth (needs root):
#
#   power:        TRIES runs of `iopath ab --fail-on-regression` whose variant B lowers the
#                 client end's tbf rate by 5 % (RATE_MBIT -> 0.95 RATE_MBIT, the same bucket);
#                 a try that exits 1 found the slowdown.
#   false alarms: TRIES runs whose variant B sets the same tbf again (nothing changes); a try
#                 that exits 1 is a false alarm.
#
# Each try: `net stream --topology veth:rate=RATE --mode two-copy --size 64K --reps REPS`, so
# REPS pairs of one cell, in ABBA order. Prints one line per try (exit code, B/A of the cell)
# and a summary with the load average and /proc/pressure/cpu before and after.
#
# Everything goes to a temporary folder that is removed at the end; the namespaces and veth
# pairs are iopath's own and go with each run. Nothing of the host changes.
#
# Usage: scripts/ab-power.sh [path/to/iopath]   (default: $IOPATH, then target/release/iopath)
#        TRIES=20 REPS=6 RATE_MBIT=200 scripts/ab-power.sh
set -euo pipefail

iopath=${1:-${IOPATH:-target/release/iopath}}
tries=${TRIES:-20}
reps=${REPS:-6}
rate=${RATE_MBIT:-200}
if [[ $(id -u) != 0 ]]; then
    echo "ab-power: needs root (a veth pair in a network namespace)" >&2
    exit 2
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The bucket iopath's own veth shaping uses (4 ms at the rate, at least two frames).
burst=$(( rate * 1000000 / 8 / 250 ))
slower=$(( rate * 95 / 100 ))

pressure() { tr '\n' ' ' </proc/pressure/cpu; }
echo "start: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure: $(pressure)"

run_series() { # name, B's rate in Mbit/s
    local name=$1 b_rate=$2 found=0 i code ratio
    for ((i = 1; i <= tries; i++)); do
        code=0
        "$iopath" ab --fail-on-regression --db "$dir/ab.db" --json \
            --set "qdisc:client:tbf rate ${b_rate}mbit burst ${burst} latency 50ms" \
            -- net stream --topology "veth:rate=${rate}mbit" --mode two-copy --size 64K \
            --duration 500ms --warmup 200ms --reps "$reps" >"$dir/out.json" 2>"$dir/err" || code=$?
        ratio=$(grep -m1 '"ratio":' "$dir/out.json" | tr -dc '0-9.' || true)
        echo "$name try $i: exit $code, B/A ${ratio:-?}"
        if [[ $code == 2 ]]; then
            cat "$dir/err" >&2
            exit 2
        fi
        if [[ $code == 1 ]]; then found=$((found + 1)); fi
    done
    echo "$name: exit 1 in $found of $tries"
}

run_series "5% slower" "$slower"
run_series "no change" "$rate"
echo "end: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure: $(pressure)"
