#!/usr/bin/env bash
# The regression gate firing on real pinned runs of `net stream`, 3 runs a side as the docs
# recommend for CI (about 3 minutes, 2 CPUs):
#
#   1. runs 1-3: `net stream`, client pinned to CPU 0, server to CPU 1;
#   2. runs 4-6: the same command while a busy loop, pinned to CPU 1 and bounded by `timeout`,
#      competes with the server;
#   3. `compare 1,2,3 4,5,6 --fail-on-regression`, and the exit code it gave
#      (0 pass, 1 regression, 2 bad input, 3 undecidable).
#
# The script itself exits 0 when the gate fired (compare exited 1), 1 otherwise.
#
# Everything goes to a temporary folder that is removed at the end. The only process this
# script starts besides iopath is the busy loop; it is killed by its own PID on every way out.
#
# Usage: scripts/gate-demo.sh [path/to/iopath]   (default: $IOPATH, then target/debug/iopath,
#        then iopath on the PATH)
set -euo pipefail

iopath=${1:-${IOPATH:-}}
if [[ -z $iopath ]]; then
    if [[ -x target/debug/iopath ]]; then iopath=target/debug/iopath; else iopath=iopath; fi
fi
if ! command -v taskset >/dev/null || ! command -v timeout >/dev/null; then
    echo "gate-demo: needs taskset and timeout (util-linux, coreutils)" >&2
    exit 2
fi
if (( $(nproc) < 2 )); then
    echo "gate-demo: needs 2 CPUs (client on 0, server on 1); this machine has $(nproc)" >&2
    exit 2
fi

dir=$(mktemp -d -t iopath-gate-demo.XXXXXX)
db=$dir/gate.db
hog=
cleanup() {
    if [[ -n $hog ]]; then kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 3 modes x 2 sizes = 6 cases (the fewest with which the sign test across cells can reach
# p < 0.05), 8 repetitions of 300 ms windows: about 25 s a run.
plan=(net stream --mode two-copy,one-copy,zero-copy --size 64K,256K
      --reps 8 --duration 300ms --warmup 50ms --client-cpus 0 --server-cpus 1 --db "$db")

for i in 1 2 3; do
    echo "== run $i: quiet (client CPU 0, server CPU 1)"
    "$iopath" "${plan[@]}" --name quiet >/dev/null
done

for i in 4 5 6; do
    echo "== run $i: a busy loop pinned to CPU 1 beside the server (bounded to 90 s)"
    timeout 90 taskset -c 1 sh -c 'while :; do :; done' &
    hog=$!
    "$iopath" "${plan[@]}" --name hog >/dev/null
    kill "$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
    hog=
done

echo "== compare 1,2,3 4,5,6 --fail-on-regression"
set +e
"$iopath" compare 1,2,3 4,5,6 --db "$db" --fail-on-regression
code=$?
set -e
echo "== exit code: $code (0 pass, 1 regression, 3 undecidable)"
if (( code == 1 )); then
    echo "gate-demo: the gate fired"
else
    echo "gate-demo: the gate did not fire (the hog may not have slowed the server enough on this machine)"
    exit 1
fi
