#!/usr/bin/env bash
# The acceptance figures of docs/benchmarks.md, "Verdicts under noise" (issue 30): how often
# `compare --fail-on-regression` cries wolf, and how often it finds a real slowdown, on real
# pinned runs of `net stream` on this machine, in the form the docs recommend for CI (3 runs a
# side).
#
#   1. pool A/A: 12 runs of one small `net stream` plan (client on CPU 0, server on CPU
#      1), `stress-ng --cpu 2` switched on for every other run (runs 1, 3, 5, ...);
#   2. pool power: 16 runs of the same plan, alternating clean and slowed, where a slowed run
#      has `stress-ng --cpu 1 --cpu-load 10` pinned to the server's CPU beside it;
#   3. 40 A/A comparisons: each draws 6 distinct runs of pool 1 (seeded), 3 a side; counts
#      the exit codes of `compare A B --fail-on-regression` (0 pass, 1 regression, 3 undecidable);
#   4. 20 power comparisons: 3 clean runs against 3 slowed runs of pool 2 (seeded draws);
#   5. the slowdown the duty cycle really caused: `compare` of all 8 clean against all 8 slowed.
#
# Every load is bounded by its own --timeout and killed by its PID after its run. Everything
# is loopback. About 20-25 minutes on 2 CPUs; the pools stay in DIR for a second look.
#
# Usage: scripts/verdicts-under-noise.sh [DIR] [path/to/iopath]
#        (default DIR: a new temporary folder; iopath: $IOPATH, then target/release/iopath)
#        PHASE=judge scripts/verdicts-under-noise.sh DIR   only the comparisons, on existing pools
#        PHASE=collect-power ...                          only pool 2 (into DIR/power.db)
#        DUTY=20 ...                                      a busier loop beside the slowed runs
set -euo pipefail

dir=${1:-$(mktemp -d -t iopath-verdicts.XXXXXX)}
iopath=${2:-${IOPATH:-target/release/iopath}}
phase=${PHASE:-all}
# The busy loop's duty cycle (per cent of the server's CPU) in the slowed runs of pool 2.
duty=${DUTY:-10}
mkdir -p "$dir"
for tool in stress-ng timeout awk; do
    command -v "$tool" >/dev/null || { echo "verdicts-under-noise: needs $tool" >&2; exit 2; }
done
if (( $(nproc) < 2 )); then
    echo "verdicts-under-noise: needs 2 CPUs (client on 0, server on 1)" >&2
    exit 2
fi

load=
stop_load() {
    if [[ -n $load ]]; then kill "$load" 2>/dev/null || true; wait "$load" 2>/dev/null || true; fi
    load=
}
trap stop_load EXIT
trap 'exit 130' INT TERM

# 3 modes x 3 sizes = 9 cases x 6 repetitions of 300 ms windows: about 30 s a run.
plan=(net stream --mode two-copy,one-copy,zero-copy --size 16K,64K,256K
      --reps 6 --duration 300ms --warmup 100ms --client-cpus 0 --server-cpus 1 --shuffle)

# run DB NAME [LOAD...]: one run of the plan with LOAD beside it (bounded), then the load stopped.
run() {
    local db=$1 name=$2
    shift 2
    if (( $# > 0 )); then
        "$@" >/dev/null 2>&1 &
        load=$!
    fi
    echo "$(date -u +%T) $name  load: $(cut -d' ' -f1-3 /proc/loadavg)  psi: $(head -1 /proc/pressure/cpu 2>/dev/null)"
    timeout 300 "$iopath" "${plan[@]}" --db "$db" --name "$name" >/dev/null
    stop_load
}

if [[ $phase == all || $phase == collect ]]; then
    for i in $(seq 1 12); do
        if (( i % 2 == 1 )); then
            run "$dir/aa.db" "aa-$i-stress" stress-ng --cpu 2 --timeout 120s
        else
            run "$dir/aa.db" "aa-$i-quiet"
        fi
    done
fi
if [[ $phase == all || $phase == collect || $phase == collect-power ]]; then
    for i in $(seq 1 8); do
        run "$dir/power.db" "clean-$i"
        run "$dir/power.db" "slow-$i" stress-ng --cpu 1 --cpu-load "$duty" --taskset 1 --timeout 120s
    done
fi

# draw SEED COUNT POOL_A POOL_B: COUNT lines "a1,a2,a3 b1,b2,b3", sides drawn without
# replacement (one pool: 6 distinct runs of it; two pools: 3 of each).
draw() {
    awk -v seed="$1" -v count="$2" -v pa="$3" -v pb="$4" '
        function pick(list, k,    n, arr, i, j, t, out) {
            n = split(list, arr, ",")
            for (i = n; i > 1; i--) { j = int(rand() * i) + 1; t = arr[i]; arr[i] = arr[j]; arr[j] = t }
            out = arr[1]; for (i = 2; i <= k; i++) out = out "," arr[i]
            return out
        }
        BEGIN {
            srand(seed)
            for (c = 0; c < count; c++) {
                if (pb == "") { six = pick(pa, 6); split(six, s, ","); print s[1] "," s[2] "," s[3], s[4] "," s[5] "," s[6] }
                else print pick(pa, 3), pick(pb, 3)
            }
        }'
}

# judge DB PAIRS LABEL: run compare on every pair, print each exit code and the totals.
judge() {
    local db=$1 pairs=$2 label=$3 codes=() a b code
    while read -r a b; do
        set +e
        "$iopath" compare "$a" "$b" --db "$db" --fail-on-regression >"$dir/last-compare.txt" 2>&1
        code=$?
        set -e
        codes+=("$code")
        echo "$label  A $a  B $b  exit $code  $(grep -m1 '^whole run' "$dir/last-compare.txt" | cut -c1-90)"
    done <<<"$pairs"
    printf '%s\n' "${codes[@]}" | sort | uniq -c | awk -v l="$label" '{print l ": exit " $2 " in " $1}'
}

if [[ $phase == all || $phase == judge ]]; then
    echo "== load now: $(cat /proc/loadavg)  $(head -1 /proc/pressure/cpu)"
    if [[ -f $dir/aa.db ]]; then
        judge "$dir/aa.db" "$(draw 30 40 1,2,3,4,5,6,7,8,9,10,11,12 '')" "A/A"
    fi
    judge "$dir/power.db" "$(draw 31 20 1,3,5,7,9,11,13,15 2,4,6,8,10,12,14,16)" "power"
    echo "== the slowdown the duty cycle caused: all 8 clean runs against all 8 slowed"
    "$iopath" compare 1,3,5,7,9,11,13,15 2,4,6,8,10,12,14,16 --db "$dir/power.db" | grep -E '^(whole run|design|contention)'
    echo "== one run a side against the history of the plan (each slowed run against the clean run before it)"
    for i in 1 3 5 7 9 11 13 15; do
        set +e
        "$iopath" compare "$i" "$((i + 1))" --db "$dir/power.db" --fail-on-regression >/dev/null 2>&1
        echo "1 vs 1 + history: $i -> $((i + 1)) exit $?"
        set -e
    done
fi
echo "pools kept in $dir"
