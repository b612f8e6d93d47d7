#!/usr/bin/env bash
# Fleet flags under noise (issue 30, docs/benchmarks.md "Fleet flags under noise"): how often
# `report --matrix` flags a host of 8 identical namespace hosts, and how often it flags the one
# host shaped to half the others' rate (and no other).
#
#   1. eight "hosts" as network namespaces on a bridge that lives in a namespace of its own
#      (never the root namespace; as tests/common/netns.rs builds them), each sending through a
#      tbf of 20 Mbit/s, so load on the machine cannot move a stream's throughput; an agent in
#      each (`net serve --agent`), the controller in the bridge's namespace;
#   2. RUNS seeded runs of the default fleet plan (`fleet run stream`, all pairs, the default
#      --reps) of a small stream case with short windows, 4 pairs at once;
#   3. the same with host 6 (index 5) behind a 10 Mbit/s tbf;
#   4. `report --matrix` of every run, and the tally: the runs that flag no host, and the slow
#      runs that flag host 6 and no other.
#
# Usage: scripts/fleet-flags.sh [path/to/iopath] [RUNS]   (default: target/release/iopath, 20)
#        JUDGE=DIR scripts/fleet-flags.sh [path/to/iopath]  (only step 4, on the databases a
#        previous run kept in DIR: another build's judgement of the same runs)
# EXTRA="FLAGS" adds flags to every fleet run (e.g. --reps 3 with a build whose default is 1).
# OUT=DIR keeps the databases and pages in DIR (default: a temporary folder, removed).
# Needs root, iproute2 and tc. Every process it starts is killed by its PID on every way out,
# and the namespaces are deleted.
set -euo pipefail

iopath=${1:-target/release/iopath}
runs=${2:-20}
iopath=$(realpath "$iopath")
hosts=8
slow_index=5
tag="iopff$$"
subnet=198.19.91

judge_dir=${JUDGE:-}
if [[ -n $judge_dir ]]; then
    dir=$judge_dir
else
    if [[ -n ${OUT:-} ]]; then dir=$OUT; mkdir -p "$dir"; else dir=$(mktemp -d -t iopath-fleet-flags.XXXXXX); fi
fi

agents=()
namespaces=()
cleanup() {
    for pid in "${agents[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
    if [[ -z $judge_dir && -z ${OUT:-} ]]; then rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addr() { echo "$subnet.$(( $1 + 1 )):7000"; }

build() {
    local bridge="${tag}b"
    ip netns add "$bridge"; namespaces+=("$bridge")
    ip -n "$bridge" link set lo up
    ip -n "$bridge" link add br0 type bridge
    ip -n "$bridge" addr add "$subnet.254/24" dev br0
    ip -n "$bridge" link set br0 up
    : >"$dir/hosts"
    for (( i = 0; i < hosts; i++ )); do
        local host="${tag}h$i"
        ip netns add "$host"; namespaces+=("$host")
        ip -n "$bridge" link add "v$i" type veth peer name eth0 netns "$host"
        ip -n "$bridge" link set "v$i" master br0 up
        ip -n "$host" addr add "$subnet.$(( i + 1 ))/24" dev eth0
        ip -n "$host" link set eth0 up
        ip -n "$host" link set lo up
        shape "$i" 20mbit
        addr "$i" >>"$dir/hosts"
    done
    echo "fleet-flags-key-0123456789abcdef" >"$dir/psk"
    for (( i = 0; i < hosts; i++ )); do
        ip netns exec "${tag}h$i" "$iopath" net serve --agent --port 7000 --psk-file "$dir/psk" \
            >/dev/null 2>"$dir/agent$i.log" &
        agents+=("$!")
    done
    for (( i = 0; i < hosts; i++ )); do
        for (( t = 0; t < 300; t++ )); do
            grep -q "listening on" "$dir/agent$i.log" 2>/dev/null && break
            sleep 0.1
        done
        grep -q "listening on" "$dir/agent$i.log" || { echo "agent $i did not listen" >&2; exit 1; }
    done
}

# Everything host $1 sends leaves through a token bucket of rate $2.
shape() {
    tc -n "${tag}h$1" qdisc replace dev eth0 root tbf rate "$2" burst 32kb latency 100ms
}

# RUNS seeded fleet runs into $dir/$1.db.
measure() {
    local what=$1
    for (( seed = 1; seed <= runs; seed++ )); do
        local start=$SECONDS
        timeout 600 ip netns exec "${tag}b" "$iopath" fleet run stream --hosts "$dir/hosts" \
            --psk-file "$dir/psk" --db "$dir/$what.db" --name "$what-$seed" --seed "$seed" \
            --mode two-copy --rx-mode copy --size 64K --threads 1 --warmup 500ms --duration 500ms \
            --concurrent-pairs 4 ${EXTRA:-} >/dev/null 2>"$dir/$what-$seed.err" \
            || { echo "run $what $seed failed:" >&2; tail -5 "$dir/$what-$seed.err" >&2; }
        echo "$what run $seed: $(( SECONDS - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)," \
             "cpu pressure $(head -1 /proc/pressure/cpu)"
    done
}

# The hosts the matrix page of run $2 of $1.db flags, one `HOST:PORT` a line.
flagged() {
    local page="$dir/$1-matrix-$2.html"
    "$iopath" report --matrix "$2" --db "$dir/$1.db" -o "$page" >"$dir/$1-matrix-$2.txt" 2>&1 || return 1
    grep -o '<td>[0-9.]*:7000</td><td><span class="failed">flagged' "$page" \
        | sed 's/<td>\([0-9.:]*\)<\/td>.*/\1/' | sort -u || true
}

# How many links the matrix page of run $2 of $1.db flagged (its first line's count).
links() {
    grep -o '[0-9]* links flagged' "$dir/$1-matrix-$2.txt" | head -1 | cut -d' ' -f1
}

judge() {
    local slow; slow=$(addr "$slow_index")
    local quiet=0 total=0 found=0 alone=0 slow_total=0 healthy_links=0 slow_links=0
    for (( run = 1; ; run++ )); do
        [[ -f $dir/healthy.db ]] || break
        local list; list=$(flagged healthy "$run") || break
        total=$(( total + 1 ))
        if [[ -z $list ]]; then quiet=$(( quiet + 1 )); fi
        if (( $(links healthy "$run") > 0 )); then healthy_links=$(( healthy_links + 1 )); fi
        echo "healthy run $run: flagged [$(echo $list)], $(links healthy "$run") links"
    done
    for (( run = 1; ; run++ )); do
        [[ -f $dir/slow.db ]] || break
        local list; list=$(flagged slow "$run") || break
        slow_total=$(( slow_total + 1 ))
        if grep -qx "$slow" <<<"$list"; then found=$(( found + 1 )); fi
        if [[ $list == "$slow" ]]; then alone=$(( alone + 1 )); fi
        if (( $(links slow "$run") > 0 )); then slow_links=$(( slow_links + 1 )); fi
        echo "slow run $run: flagged [$(echo $list)], $(links slow "$run") links"
    done
    echo "== identical hosts: no host flagged in $quiet of $total runs; a link flagged in $healthy_links"
    echo "== host $(( slow_index + 1 )) ($slow) at half rate: flagged in $found of $slow_total runs, alone in $alone; a link flagged in $slow_links"
    echo "== the noise each matrix judged against: $dir/{healthy,slow}-matrix-RUN.txt"
}

if [[ -z $judge_dir ]]; then
    echo "== $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); $(head -1 /proc/pressure/cpu); $(nproc) CPUs"
    build
    measure healthy
    shape "$slow_index" 10mbit
    measure slow
    echo "== $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); $(head -1 /proc/pressure/cpu)"
fi
judge
