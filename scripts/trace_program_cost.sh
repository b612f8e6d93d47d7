#!/bin/bash
# The trace probe's programs' own run time over one 3 s window, against the two CPUs' time of
# that window: kernel.bpf_stats_enabled=1, `bpftool -j prog show` polled every 0.2 s while the
# programs are attached (they are detached at the window's close), the largest count of each.
# The statistics add two clock reads to every run: the figure is an upper bound.
# usage: scripts/trace_program_cost.sh target/release/iopath stream|rr   (root, bpftool)
set -u
B=$1; W=$2
command -v bpftool >/dev/null || { echo "needs bpftool (apt install bpftool)" >&2; exit 2; }
was=$(sysctl -n kernel.bpf_stats_enabled); sysctl -q kernel.bpf_stats_enabled=1
trap 'sysctl -q kernel.bpf_stats_enabled=$was' EXIT
rm -f /tmp/bc.db /tmp/bc-poll.txt
if [ $W = stream ]; then args="net stream --size 64k --mode one-copy"; else args="net rr --mode two-copy --request-size 64 --response-size 64"; fi
IOPATH_TRACE=on $B $args --duration 3 --warmup 1 --client-cpus 0 --server-cpus 1 --db /tmp/bc.db --json > /tmp/bc.json 2>/dev/null &
pid=$!
while kill -0 $pid 2>/dev/null; do bpftool -j prog show >> /tmp/bc-poll.txt 2>/dev/null; echo >> /tmp/bc-poll.txt; sleep 0.2; done
wait $pid
python3 - <<'PY'
import json
best={}
for line in open('/tmp/bc-poll.txt'):
    line=line.strip()
    if not line: continue
    for p in json.loads(line):
        if p.get('type') in ('tracepoint','raw_tracepoint') and 'run_cnt' in p:
            k=p['id']; 
            if k not in best or p['run_cnt']>best[k]['run_cnt']: best[k]=p
tot_ns=sum(p['run_time_ns'] for p in best.values()); tot_cnt=sum(p['run_cnt'] for p in best.values())
d=json.load(open('/tmp/bc.json'))[0]['observation']['metrics']
g=lambda n:[m['value'] for m in d if m['name']==n and m.get('value') is not None]
for p in sorted(best.values(), key=lambda p:p['id']):
    print(f"  {p['type']:15} runs {p['run_cnt']:8} {p['run_time_ns']/max(p['run_cnt'],1):6.0f} ns/run")
print(f"programs: {tot_cnt} runs, {tot_ns/1e6:.1f} ms, {tot_ns/max(tot_cnt,1):.0f} ns/run; {100*tot_ns/6e9:.2f} % of 2 CPUs x 3 s; ", *(f'{n}={g(n)[0]:.4g}' for n in ('throughput_gbps','transactions_per_s') if g(n)))
PY
