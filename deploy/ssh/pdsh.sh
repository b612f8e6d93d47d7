#!/bin/bash
# SSH fan-out with pdsh: start an iopath agent on every host of HOSTS (one HOST:PORT per line,
# `#` comments, the file `iopath fleet run --hosts` reads), then run the controller here.
#   deploy/ssh/pdsh.sh hosts fleet.db
# The agents keep running (nohup), ready for the next run; each host keeps its agent's process
# id in /tmp/iopath-agent.pid, so they stop with
#   pdsh -w "$(deploy/ssh/pdsh.sh --list hosts)" 'kill "$(cat /tmp/iopath-agent.pid)"'
# The key must already be at /etc/iopath/psk on every host and here.
set -euo pipefail

list() { grep -v '^[[:space:]]*\(#\|$\)' "$1" | sed 's/:[0-9]*$//' | paste -sd, -; }
if [ "${1:-}" = --list ]; then list "${2:?usage: pdsh.sh --list HOSTS}"; exit 0; fi

hosts_file=${1:?usage: pdsh.sh HOSTS [DB]}
db=${2:-fleet.db}

pdsh -w "$(list "$hosts_file")" 'nohup iopath net serve --agent --port 7000 --psk-file /etc/iopath/psk > /tmp/iopath-agent.log 2>&1 < /dev/null & echo $! > /tmp/iopath-agent.pid'

iopath fleet run rr --hosts "$hosts_file" --pairs all --psk-file /etc/iopath/psk --db "$db"
