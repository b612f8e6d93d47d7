#!/bin/bash
# old_vs_new.sh OLD NEW PAIRS OUT: a 64 KiB one-copy stream and a 64 B two-copy rr p50, pinned 0/1,
# alternated old/new then new/old, one line a run in OUT (issue 33: a refactor leaves both unchanged)
OLD=$1; NEW=$2; PAIRS=$3; OUT=$4; : > $OUT
run() { # $1 label $2 binary $3 stream|rr
  local db=/tmp/on-$$.db; rm -f $db
  if [ $3 = stream ]; then
    $2 net stream --size 64k --mode one-copy --duration 3 --warmup 1 --client-cpus 0 --server-cpus 1 --db $db --json 2>/dev/null
  else
    $2 net rr --mode two-copy --request-size 64 --response-size 64 --duration 3 --warmup 1 --client-cpus 0 --server-cpus 1 --db $db --json 2>/dev/null
  fi | python3 -c "
import json,sys
d=json.load(sys.stdin)[0]['observation']['metrics']
g=lambda n:[m['value'] for m in d if m['name']==n and m.get('value') is not None]
print('$3 $1', *(f'{n}={g(n)[0]:.4g}' for n in ('throughput_gbps','latency_p50_us') if g(n)))
" >> $OUT
  rm -f $db
}
for i in $(seq 1 $PAIRS); do
  for w in stream rr; do
    if [ $((i % 2)) = 1 ]; then run old $OLD $w; run new $NEW $w; else run new $NEW $w; run old $OLD $w; fi
  done
  echo "pair $i $(cat /proc/loadavg)" >> $OUT
done
