#!/usr/bin/env bash
# sendfile at 128 KiB: iopath next to `iperf3 -Z`, alternated A B A B over loopback (issue 36.5).
#
# Each round runs, one after the other, with the client on CPU 0 and the server on CPU 1:
#   A  iopath net stream --mode sendfile --size 128K --fields 1 $IOPATH_FLAGS   (system throughput_gbps;
#      its receiver woken once a whole message is queued, --rx-wake message, the default)
#   W  the same with --rx-wake data: woken on any data, as iperf3's receiver is
#   B  iperf3 -c 127.0.0.1 -A 0,1 -Z (server: taskset -c 1 iperf3 -s -1)       (sum_received)
# Prints one line per round (A, W, B, A/B, W/B) and the medians, the medians of the per-round
# ratios, with the load average and /proc/pressure/cpu before and after: a busy machine's
# figures are not results. Then, for each ratio, its median with a distribution-free 95%
# interval (order statistics of the per-round ratios: the median lies between the k-th
# smallest and the k-th largest with probability 1 - 2 P(Binomial(n, 1/2) < k), k the largest
# keeping that at least 0.95; 6 rounds or more, fewer give min..max with its lower coverage
# said, and no verdict) and a one-line verdict: iopath ahead (interval wholly above 1),
# behind (wholly below) or within (holding 1).
#
# Usage: scripts/sendfile_vs_iperf3.sh [path/to/iopath]   (default: $IOPATH, then target/release/iopath)
#        ROUNDS=6 DURATION=5 WARMUP=1 IOPATH_FLAGS=--no-perf PORT=5301 scripts/sendfile_vs_iperf3.sh
#        IOPATH_TRACE=on scripts/sendfile_vs_iperf3.sh      (iopath with its trace probe)
#        scripts/sendfile_vs_iperf3.sh --ratios 0.80 0.91 …  (only the interval line and the
#        verdict of per-round ratios measured before; nothing is run)
# Every figure goes to a temporary folder that is removed at the end; nothing of the host changes.
set -euo pipefail

# The median of the per-round ratios with its order-statistic interval and the verdict, one
# line: `A/B ...: median 0.870, interval 0.750..0.940 (order statistics 1 and 6 of 6,
# coverage 96.9%): iopath behind iperf3 -Z`.
ratio_finding() {
    local what=$1
    shift
    printf '%s\n' "$@" | sort -g | awk -v what="$what" '
        { r[++n] = $1 }
        END {
            med = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
            # The interval r[k]..r[n + 1 - k] holds the median with probability
            # 1 - 2 P(B <= k - 1), B ~ Binomial(n, 1/2): the largest k keeping that at least
            # 0.95 (k = 1, min..max, when even that falls short).
            k = 1; cdf = 1 / 2 ^ n; c = n          # cdf = P(B <= k - 1); c = C(n, k)
            while (k + 1 <= (n + 1) / 2 && 1 - 2 * (cdf + c / 2 ^ n) >= 0.95) {
                cdf += c / 2 ^ n
                c = c * (n - k) / (k + 1)
                k++
            }
            coverage = 1 - 2 * cdf
            lo = r[k]; hi = r[n + 1 - k]
            verdict = lo > 1 ? "iopath ahead of iperf3 -Z" : hi < 1 ? "iopath behind iperf3 -Z" : "within: the interval holds 1"
            short = ""
            if (coverage < 0.95) {
                short = sprintf(", short of 95%%: %d rounds; 6 or more give one", n)
                verdict = "no verdict at this coverage"
            }
            printf "%s: median %.3f, interval %.3f..%.3f (order statistics %d and %d of %d, coverage %.1f%%%s): %s\n",
                what, med, lo, hi, k, n + 1 - k, n, 100 * coverage, short, verdict
        }'
}

if [[ ${1:-} == --ratios ]]; then
    shift
    if [[ $# -eq 0 ]]; then
        echo "sendfile_vs_iperf3: --ratios takes the per-round ratios, e.g. --ratios 0.80 0.91 0.86" >&2
        exit 2
    fi
    for r in "$@"; do
        if ! [[ $r =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
            echo "sendfile_vs_iperf3: --ratios takes positive numbers, not '$r'" >&2
            exit 2
        fi
    done
    ratio_finding "A/B" "$@"
    exit 0
fi

iopath=${1:-${IOPATH:-target/release/iopath}}
rounds=${ROUNDS:-6}
duration=${DURATION:-5}
warmup=${WARMUP:-1}
port=${PORT:-5301}
read -r -a extra <<<"${IOPATH_FLAGS:-}"
for tool in "$iopath" iperf3 jq taskset; do
    if ! command -v "$tool" >/dev/null; then
        echo "sendfile_vs_iperf3: $tool is not installed or not built (cargo build --release)" >&2
        exit 2
    fi
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ && $duration =~ ^[1-9][0-9]*$ && $warmup =~ ^[0-9]+$ ]]; then
    echo "sendfile_vs_iperf3: ROUNDS and DURATION are whole numbers from 1, WARMUP from 0 (seconds)" >&2
    exit 2
fi
dir=$(mktemp -d)
server=
cleanup() {
    if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT

pressure() { tr '\n' ' ' </proc/pressure/cpu; }
echo "start: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure: $(pressure)"
echo "iopath: $iopath ${extra[*]:-}; $rounds rounds of ${duration}s after ${warmup}s of warm-up"

iopath_gbps() {
    if ! "$iopath" net stream "$@" --mode sendfile --size 128K --fields 1 --client-cpus 0 --server-cpus 1 \
        --duration "${duration}s" --warmup "${warmup}s" --db "$dir/runs.db" --json ${extra[@]+"${extra[@]}"} \
        >"$dir/a.json" 2>"$dir/a.err"; then
        cat "$dir/a.err" >&2
        exit 1
    fi
    jq -r '[.[0].observation.metrics[] | select(.name == "throughput_gbps" and .role == "system") | .value][0]' "$dir/a.json"
}

iperf3_gbps() {
    taskset -c 1 iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
    server=$!
    # The server is ready when its port listens (at most 5 s).
    for _ in $(seq 50); do
        ss -Hltn "sport = :$port" | grep -q . && break
        sleep 0.1
    done
    if ! taskset -c 0 iperf3 -c 127.0.0.1 -p "$port" -A 0,1 -Z -t "$duration" -O "$warmup" -J >"$dir/b.json"; then
        jq -r '.error // empty' "$dir/b.json" >&2 || true
        exit 1
    fi
    wait "$server" || true
    server=
    jq -r '.end.sum_received.bits_per_second / 1e9' "$dir/b.json"
}

a_all=() w_all=() b_all=() ratios=() w_ratios=()
printf '%-6s %12s %12s %12s %8s %8s\n' round iopath iopath-data iperf3-Z A/B W/B
for round in $(seq "$rounds"); do
    a=$(iopath_gbps)
    w=$(iopath_gbps --rx-wake data)
    b=$(iperf3_gbps)
    r=$(jq -n "$a / $b")
    rw=$(jq -n "$w / $b")
    a_all+=("$a") w_all+=("$w") b_all+=("$b") ratios+=("$r") w_ratios+=("$rw")
    printf '%-6s %12.2f %12.2f %12.2f %8.3f %8.3f\n' "$round" "$a" "$w" "$b" "$r" "$rw"
done

median() { printf '%s\n' "$@" | sort -g | jq -s 'if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end'; }
span() { printf '%s-%s' "$(printf '%s\n' "$@" | sort -g | head -1 | xargs printf '%.3f')" "$(printf '%s\n' "$@" | sort -g | tail -1 | xargs printf '%.3f')"; }
printf 'median %12.2f %12.2f %12.2f %8.3f %8.3f\n' \
    "$(median "${a_all[@]}")" "$(median "${w_all[@]}")" "$(median "${b_all[@]}")" \
    "$(median "${ratios[@]}")" "$(median "${w_ratios[@]}")"
echo "per-round ratios: A/B $(span "${ratios[@]}"), W/B $(span "${w_ratios[@]}")"
ratio_finding "A/B (iopath sendfile / iperf3 -Z)" "${ratios[@]}"
ratio_finding "W/B (iopath sendfile --rx-wake data / iperf3 -Z)" "${w_ratios[@]}"
echo "end: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure: $(pressure)"
