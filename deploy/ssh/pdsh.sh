#!/bin/bash
# SSH fan-out with pdsh: start an iopath agent on every host of HOSTS (one HOST:PORT per line,
# `#` comments: the file `iopath fleet run --hosts` reads), on the port its line names, then
# run the controller here over all pairs (FLAGS: more `fleet run rr` flags, e.g. --duration 1s):
#   deploy/ssh/pdsh.sh hosts [fleet.db [FLAGS...]]
# The agents keep running (nohup), ready for the next run. Each host keeps its agent's process
# id and log in $IOPATH_AGENT_DIR/iopath-agent-ADDRESS:PORT.pid and .log (ADDRESS: the one ssh
# reached it at, so hosts sharing a file system do not share a file); they stop with
#   deploy/ssh/pdsh.sh --stop hosts
# Settings, from the environment (default), the same here and on every host:
#   IOPATH            the iopath program (iopath, from PATH)
#   IOPATH_PSK        the pre-shared key, already on every host and here (/etc/iopath/psk)
#   IOPATH_AGENT_DIR  where each host keeps its agent's pid and log files (/tmp)
# pdsh's own: PDSH_RCMD_TYPE=ssh (the files are named from ssh's $SSH_CONNECTION), PDSH_SSH_ARGS.
set -euo pipefail
iopath=$(printf %q "${IOPATH:-iopath}")
psk=$(printf %q "${IOPATH_PSK:-/etc/iopath/psk}")
usage='usage: pdsh.sh HOSTS [DB [FLAGS...]] | pdsh.sh --stop HOSTS | pdsh.sh --list HOSTS'
case "${1:-}" in --stop | --list) hosts_file=${2:-} ;; *) hosts_file=${1:-} ;; esac
[ -f "$hosts_file" ] || { echo "$usage (HOSTS: a file of HOST:PORT lines)" >&2; exit 2; }

# The HOST:PORT lines of a hosts file, comments and blanks dropped.
entries() { sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$1"; }
ports() { entries "$1" | sed 's/.*://' | sort -un; }
# The hosts whose agent serves port $2, comma-separated as pdsh -w takes them.
hosts_on() { entries "$1" | sed -n "s/:$2\$//p" | paste -sd, -; }
# Run on each host first: $f, its agent's files without the extension.
files() { printf 'f=%s/iopath-agent-$(set -- $SSH_CONNECTION; echo $3):%s;' "$(printf %q "${IOPATH_AGENT_DIR:-/tmp}")" "$1"; }

case "$1" in
--list) entries "$hosts_file" | sed 's/:[0-9]*$//' | paste -sd, -; exit ;;
--stop)
    for port in $(ports "$hosts_file"); do
        pdsh -S -w "$(hosts_on "$hosts_file" "$port")" "$(files "$port")" 'kill "$(cat $f.pid)" && rm $f.pid'
    done
    exit ;;
esac
db=${2:-fleet.db}
shift $(($# < 2 ? $# : 2))

# On each host: the agent in the background, its pid kept, then at most 10 s until it listens
# (else its log, and pdsh -S fails).
for port in $(ports "$hosts_file"); do
    pdsh -S -w "$(hosts_on "$hosts_file" "$port")" "$(files "$port")" \
        "nohup $iopath net serve --agent --port $port --psk-file $psk" '> $f.log 2>&1 < /dev/null & echo $! > $f.pid;' \
        'for i in $(seq 100); do grep -q "listening on" $f.log && exit 0; sleep 0.1; done; cat $f.log; exit 1'
done

"${IOPATH:-iopath}" fleet run rr --hosts "$hosts_file" --pairs all --psk-file "${IOPATH_PSK:-/etc/iopath/psk}" --db "$db" "$@"
