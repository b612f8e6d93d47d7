//! The "Examples:" section of every command's `--help` (and manual page). Each example line
//! is a real command: tests/help.rs walks every subcommand's help and parses every line after
//! `Examples:` with the same clap parser (text after `#`, `>` or `|` is the shell's, not
//! iopath's). Keep them short, runnable, and about what the command is for.

pub const NET: &str = "\
Examples:
  iopath net stream --mode one-copy,zero-copy --size 4K..1M
  iopath net records --record-size 128,1K --records 1..32 --mode copy-out,zero-copy
  iopath net rr --request-size 64,1K --response-size 64
  iopath net crr --threads 2
  iopath net udp-stream --mode sendmmsg,gso --size 1K --rate 100k
  iopath net serve --listen 0.0.0.0:5201            # the far end for net stream/rr/crr --connect";

pub const NET_STREAM: &str = "\
Examples:
  iopath net stream --mode two-copy,one-copy,zero-copy --size 1K,64K,1M --threads 1,2
  iopath net stream --mode one-copy --fields 1 --size 64K --client-cpus 0 --server-cpus 0  # one CPU
  iopath net stream --mode zero-copy --size 1M --verify --json > zc.json
  iopath net stream --size 4K..1M --reps 6 --db lab.db      # kept for report, export, compare
  iopath net stream --connect 10.0.0.2:5201 --mode zero-copy  # with `iopath net serve` there
  iopath net stream --mode sendfile,splice --size 1K,64K,1M --verify
  iopath net stream --mode one-copy,sendfile,splice --prove-copies  # copied or by reference?
  iopath net stream --mode one-copy,uring,uring-zc --size 64K --verify  # io_uring's syscall model
  iopath net stream --mode zero-copy,uring-zc --size 64K --zc-ring 1,1M,8M  # ring size vs speed
  iopath net stream --mode uring-zc --size 1M --fixed-buffers --zc-ring 4M  # registered buffer
  iopath net stream --mode one-copy,zero-copy --rx-mode scatter,trunc,zerocopy --size 64K,1M
  iopath net stream --mode zero-copy --rx-mode zerocopy --size 1M --verify  # pages mapped?
  iopath net stream --clients 8 --mode one-copy --topology veth:rate=1gbit  # incast: fair share?
  iopath net stream --mode sendfile --size 128K --fields 1 --align misaligned  # the slow copy

Modes (the sender):
  two-copy   serialise the fields into one buffer in user space, then send() it
  one-copy   sendmsg() with one iovec per field: only the kernel copies
  zero-copy  sendmsg(MSG_ZEROCOPY): the kernel pins the pages; over loopback and veth it
             copies them anyway at delivery, and iopath reports the fraction it copied
  uring      io_uring SENDMSG with one iovec per field: one-copy's copies, io_uring's
             syscall model (16 messages per io_uring_enter, linked so they stay in order)
  uring-zc   io_uring SENDMSG_ZC: pages pinned; each message's notification says whether the
             kernel copied after all, and its buffer is reused only after it
  sendfile   the message staged in a file in the page cache (a memfd), sent with sendfile()
  splice     vmsplice() the fields into a pipe, splice() the pipe into the socket
             sendfile and splice have no completion notification: with --verify, which
             rewrites every message, each keeps a ring larger than the socket buffers can
             hold, and the check catches a slot the kernel still held when it was rewritten

--zc-ring sets how many bytes of messages the zero-copy modes keep in flight (default 8 MiB);
--zc-ring 1 is one buffer reused after each completion. A mode the kernel refuses (io_uring
disabled, no SENDMSG_ZC) reports `unavailable: <reason>`.
--prove-copies says, per case, what the kernel really did with the sender's bytes: it rewrites
a sent message's source before the receiver reads it (old bytes: copied; new: by reference).

Receive modes (--rx-mode; without it two-copy receives with copy, the others with scatter):
  copy       recv() into one contiguous buffer
  scatter    recvmsg() with one iovec per field: the kernel copies straight into the fields
  trunc      recv(MSG_TRUNC): the kernel discards the bytes, so the sender's cost is seen
             alone (iperf3 --skip-rx-copy); --verify is refused with it
  zerocopy   TCP_ZEROCOPY_RECEIVE maps whole 4 KiB pages of the receive queue instead of
             copying; rx_mapped_fraction says how much was mapped (on loopback: only from a
             zero-copy sender; TCP_MAXSEG 4108 is set so segments are whole pages)

Sizes: 64, 4K, 1M, lists 1K,64K, ranges A..B (both ends and every power of two between:
1K..3K is 1K,2K,3K). Each size must be at least --fields bytes.
Every metric carries its source (pmu, software, rusage, kernel, trace, tool, estimate); see
docs/output.md. trace: kernel tracepoints, no PMU needed (kernel_copy_bytes_per_byte says how
often the kernel copied each payload byte on receive); its eBPF programs take under 3 % of
the CPU time of a fast stream, and IOPATH_TRACE=off turns them off.";

pub const NET_RECORDS: &str = "\
Examples:
  iopath net records                                # 128 B and 1 KiB, 1..32 records, every mode
  iopath net records --mode copy-out,zero-copy --record-size 128 --records 15,16,17
  iopath net records --table 16M --pick random,hot --records 16 --verify
  iopath net records --topology veth --outstanding 1,8 --client-cpus 0 --server-cpus 1
  iopath net records --topology remote:10.0.0.1:5201 --mode copy-out,zero-copy  # net serve there

Modes:
  copy-out   memcpy the N records into one transmit buffer, then send() it
  gather     sendmsg() with one iovec per record, straight from the table
  zero-copy  sendmsg(MSG_ZEROCOPY): the kernel pins the table's pages; over loopback and veth
             it copies them anyway at delivery, and iopath reports the fraction it copied
  uring-zc   io_uring SENDMSG_ZC with one iovec per record

The table (--table, default 256M) is filled once per case, before the window, and never
written while it runs. DRAM B/B is memory traffic per payload byte (docs/output.md).";

pub const NET_SERVE: &str = "\
Examples:
  iopath net serve                                  # listen on 127.0.0.1:5201 until Ctrl-C
  iopath net serve --listen 127.0.0.1:5202 --once   # one session, then exit
  iopath net serve --listen 0.0.0.0:5201 --psk-file key --max-session-bytes 50G  # other hosts
  iopath net serve --agent --port 7000 --psk-file key --allow-peers 10.0.0.0/8  # a fleet agent
  iopath net serve --listen 0.0.0.0:5201 --sessions 8  # eight clients at once, e.g. an incast
  iopath net stream --connect 10.0.0.1:5201 --psk-file key  # the client, on the other host
  iopath net stream --connect 10.0.0.1:5201 --clients 8  # eight sessions at once to --sessions 8";

pub const NET_RR: &str = "\
Examples:
  iopath net rr                                     # 64 B ping-pong in every send mode
  iopath net rr --mode one-copy --request-size 64,1K --response-size 64,16K
  iopath net rr --mode two-copy --client-cpus 0 --server-cpus 1   # pinned apart
  iopath net rr --inflight 1,4,16 --threads 2       # closed loop, N transactions in flight
  iopath net rr --mode two-copy --rate 20000 --duration 5s   # open loop: latency under a fixed load
  iopath net rr --topology netns --verify           # both ends in a fresh namespace (root)
  iopath net rr --request-size 80000 --topology veth:gso_ipv4_max_size=185000   # BIG TCP
  iopath net rr --request-size 80000 --topology veth:ipv6,gso_max_size=185000   # BIG TCP, IPv6
  iopath net rr --connect 10.0.0.2:5201             # with `iopath net serve` there
  iopath net rr --mode one-copy,uring --rx-mode copy,zerocopy --verify   # send x receive
  iopath net rr --mode two-copy --rx-mode trunc     # arrivals dropped: the send side alone

Latency is the client's: request sent (open loop: when it was due) until its response
arrived, as HDR percentiles p50/p90/p99/p99.9/max; the CDF is stored for the report. CPU and
system calls are per transaction, per role. --mode is how both ends send, --rx-mode how both
ends receive (without it two-copy receives with copy, the others with scatter). See
docs/output.md.";

pub const NET_CRR: &str = "\
Examples:
  iopath net crr                        # 64 B requests and responses, two-copy and one-copy
  iopath net crr --threads 1,2 --request-size 64 --response-size 1K
  iopath net crr --connect 10.0.0.2:5201 --duration 2s
  iopath net crr --mode uring,uring-zc --rx-mode zerocopy   # any mode but zero-copy

Every transaction opens a connection, sends the request, reads the response and closes (the
client closes first, so its ports wait in TIME_WAIT: a run that exhausts
net.ipv4.ip_local_port_range stops with that named). Connect, exchange and close are timed
apart (connect_p50_us, exchange_p50_us, close_p50_us).";

pub const NET_UDP_RR: &str = "\
Examples:
  iopath net udp-rr                                 # 64 B ping-pong, send and sendmsg
  iopath net udp-rr --mode send,sendmsg,uring --rx-mode recv,recvmmsg --verify
  iopath net udp-rr --mode sendmmsg,gso --inflight 8 --rx-mode recvmmsg
  iopath net udp-rr --rate 20000 --threads 2 --duration 5s   # open loop
  iopath net udp-rr --inflight 64 --rcvbuf 1K --loss-timeout 50ms   # drops on purpose
  iopath net udp-rr --topology veth --verify        # across a veth pair (root)
  iopath net udp-rr --connect 10.0.0.2:5201         # with `iopath net serve` there

Latency is the client's: request sent (open loop: when it was due) until its reply. A
request with no reply within --loss-timeout is lost: counted (lost), and replaced by a new
one; a reply after that is counted late, a repeated one duplicate, neither timed.";

pub const NET_LOAD: &str = "\
Examples:
  iopath net load                                   # 2 flows up, one-copy, a 64 B probe beside them
  iopath net load --direction up,down,both --flows 4   # rrul's shape: 4 each way
  iopath net load --mode two-copy,one-copy,zero-copy --client-cpus 0 --server-cpus 1 --reps 6
  iopath net load --topology veth:rate=100mbit --idle 3s --duration 10s   # a shaped link (root)
  iopath net load --topology veth:rate=100mbit,queue=200ms --cc cubic   # bufferbloat (root)
  iopath net load --probe-rate 100 --duration 10s   # the probe paced at 100 round trips a second
  iopath net load --connect 10.0.0.2:5201           # with `iopath net serve` there

The probe is a request/response on a connection of its own, every round trip timed: first
alone for --idle (the idle figures), then the flows start and ramp for --warmup, then the
loaded window (--duration). Inflation is loaded over idle; RPM is a minute over the mean of
the fastest 95 % of the loaded round trips (the responsiveness draft's trimmed mean).";

pub const NET_UDP_STREAM: &str = "\
Examples:
  iopath net udp-stream                             # 1 KiB datagrams, send/recv, unpaced
  iopath net udp-stream --mode send,sendmmsg,gso --rx-mode recv,gro --size 64,1K,8K
  iopath net udp-stream --rate 100k --verify        # paced at 100000 datagrams/s: expect 0 lost
  iopath net udp-stream --rate 2Gbit --size 1400    # paced in payload bits per second
  iopath net udp-stream --rcvbuf 4K --mode sendmmsg --batch 64   # a tiny receive buffer: loss
  iopath net udp-stream --topology veth:mtu=1500 --mode gso --size 1472
  iopath net udp-stream --topology veth:peer=drop --mode send,zerocopy,uring-zc --size 1400
  iopath net udp-stream --connect 10.0.0.2:5201     # with `iopath net serve` there

Throughput is what the server received inside its window; lost is what the client sent in
the whole session that never arrived, counted after the server drained its sockets (never
skewed by datagrams in flight at the window's end). Jitter is the RFC 3550 estimate. --rate
paces with a user-space gap between send calls (a call carries --batch datagrams in the
batching modes). Across veth:peer=drop the server's end drops every datagram at ingress:
nothing is delivered, so zero copy is not copied (zc copied 0) and the client's Gbit/s and
CPU per datagram are the measurement. See docs/output.md.";

pub const RUN: &str = "\
Examples:
  iopath run --resume 4                             # finish run 4 after Ctrl-C or a crash
  iopath run --resume 4 --db lab.db
  iopath run --resume 7 --db fleet.db --psk-file key  # a fleet or --connect run: its key again
  iopath run --plan threads.toml                    # a plan the launcher saved (docs/output.md)";

pub const QUICK: &str = "\
Examples:
  iopath quick                                      # about a minute; report beside the database
  iopath quick --db lab.db -o quick.html --name before-upgrade";

pub const SERVERS: &str = "\
Examples:
  iopath servers                                    # every model, echo:64, 1, 10 and 100 clients
  iopath servers --model epoll,uring --clients 1000 --client-threads 2
  iopath servers --model pool --pool-size 8 --request procs:2 --clients 10
  iopath servers --model epoll --rate 20000 --clients 100   # open loop: latency under a fixed load
  iopath servers --model threads,epoll --clients 1..64 --reps 6 --db lab.db

Clients: lists 1,10,100 or ranges A..B (both ends and every power of two between).";

pub const PROCS: &str = "\
Examples:
  iopath procs serve --model epoll --listen 127.0.0.1:7070
  iopath procs query 127.0.0.1:7070 -k 5";

pub const PROCS_SERVE: &str = "\
Examples:
  iopath procs serve                                # epoll on 127.0.0.1:7070 until Ctrl-C
  iopath procs serve --model uring --listen 127.0.0.1:0 --interval 1s
  iopath procs serve --model pool --pool-size 8 --max-conns 100 --cpus 0";

pub const PROCS_QUERY: &str = "\
Examples:
  iopath procs query 127.0.0.1:7070
  iopath procs query 127.0.0.1:7070 -k 10 --json
  iopath procs query 127.0.0.1:7070 --interval --clients 50   # the server runs with --interval";

pub const RUNS: &str = "\
Examples:
  iopath runs                                       # runs in iopath-results/iopath.db
  iopath runs --db lab.db
  iopath runs --upgrade --db old.db                 # a database from an older iopath";

pub const REPORT: &str = "\
Examples:
  iopath report                                     # the newest run, beside the database
  iopath report 3 -o run3.html                      # charts in run3-charts/
  iopath report 3 --db lab.db
  iopath report --matrix 2 --db fleet.db -o matrix.html  # a fleet run's heat maps only
  iopath report --format csv > newest.csv           # the data: one row per case and repetition
  iopath report 3 --format json -o run3.json
  iopath report --format otava --db history.db -o otava.csv   # every run, for change points
  iopath report 3 --format bmf -o bench.json        # Bencher Metric Format";

pub const EXPORT: &str = "\
Examples:
  iopath export > newest.csv
  iopath export 3 --format json -o run3.json
  iopath export 3 --db lab.db --format csv
  iopath export --format otava --db history.db -o otava.csv   # every run
  iopath export 3 --format bmf -o bench.json        # Bencher Metric Format";

pub const MERGE: &str = "\
Examples:
  iopath merge all.db node1.db node2.db   # every run of both, with provenance
  iopath merge history.db nightly/*.db    # nightly: runs already there skipped
  iopath runs --db all.db";

pub const COMPARE: &str = "\
Examples:
  iopath compare 3 4                                # each workload's headline metric
  iopath compare 3 4 --metric client.cycles_per_byte
  iopath compare 1 2 --db lab.db --metric system.requests_per_s
  iopath compare 1,2,3 4,5,6 --fail-on-regression   # CI: exit 1 slower, 3 undecidable
  iopath compare main.db:last:3 pr.db:1,2,3         # main's last 3 runs of the plan
  iopath compare last:3 7                           # run 7 against the 3 before it
  iopath compare main.db pr.db                      # newest runs, earlier ones as history
  iopath compare 5 6 --ignore fields                # 8 fields against 1: match on the rest
  iopath compare 3 4 --correction holm              # any false alarm, not the share (bh)";

pub const AB: &str = "\
Examples:
  iopath ab --set dev:client:gro=off -- net stream --topology veth --reps 8
  iopath ab --set 'qdisc:client:tbf rate 1gbit burst 500k lat 50ms' -- net stream --topology veth
  iopath ab --fail-on-regression --set flag:--align=misaligned -- net stream --reps 10
  iopath ab --host-settings --set sysctl:net.ipv4.tcp_autocorking=0 -- net stream --reps 8
  iopath ab --set sysctl:net.ipv4.tcp_autocorking=0 --order random -- net rr --topology netns
  iopath ab --show 12 --fail-on-regression    # a stored A/B run: exit 1 worse with B, 3 undecidable
  iopath compare 12 12                        # the same, one A/B run named twice";

pub const SYSINFO: &str = "\
Examples:
  iopath sysinfo
  iopath sysinfo --json > machine.json";

pub const MICRO: &str = "\
Examples:
  iopath micro                                      # the benchmarks and their variants
  iopath micro all --quick                          # every benchmark in a few seconds
  iopath micro memlat --max 64M --hugepages
  iopath micro syscall --json
  iopath micro ctxswitch --reps 6                   # 6 repetitions: medians with intervals";

pub const MICRO_ALL: &str = "\
Examples:
  iopath micro all --quick
  iopath micro all --samples 11 --db lab.db
  iopath micro all --quick --reps 6";

pub const MICRO_TIMER: &str = "\
Examples:
  iopath micro timer
  iopath micro timer --samples 51
  iopath micro timer --reps 6";

pub const MICRO_CALL: &str = "\
Examples:
  iopath micro call
  iopath micro call --samples 51 --json
  iopath micro call --reps 6";

pub const MICRO_SYSCALL: &str = "\
Examples:
  iopath micro syscall
  iopath micro syscall --variant getppid,read_dev_zero
  iopath micro syscall --reps 6 --shuffle";

pub const MICRO_PROC: &str = "\
Examples:
  iopath micro proc
  iopath micro proc --variant posix_spawn --program /bin/true
  iopath micro proc --reps 6";

pub const MICRO_THREAD: &str = "\
Examples:
  iopath micro thread
  iopath micro thread --variant start_latency --samples 51
  iopath micro thread --reps 6";

pub const MICRO_CTXSWITCH: &str = "\
Examples:
  iopath micro ctxswitch
  iopath micro ctxswitch --pinned yes --variant futex_threads
  iopath micro ctxswitch --reps 6";

pub const MICRO_MEMLAT: &str = "\
Examples:
  iopath micro memlat --quick
  iopath micro memlat --min 4K --max 64M --stride 128 --hugepages
  iopath micro memlat --reps 6";

pub const MICRO_MEMBW: &str = "\
Examples:
  iopath micro membw
  iopath micro membw --size 256M --variant copy
  iopath micro membw --reps 6";

pub const MICRO_PAGEFAULT: &str = "\
Examples:
  iopath micro pagefault
  iopath micro pagefault --variant major --dir /var/tmp --file-size 64M
  iopath micro pagefault --reps 6";

pub const MICRO_TCP: &str = "\
Examples:
  iopath micro tcp
  iopath micro tcp --variant rtt,connect --samples 51
  iopath micro tcp --reps 6";

pub const MICRO_FS: &str = "\
Examples:
  iopath micro fs --quick
  iopath micro fs --dir /var/tmp --file-size 256M --procs 1..8
  iopath micro fs --variant cache_read --dir /var/tmp --cache-time 2m
  iopath micro fs --remote=rate=1gbit --block-size 4K,64K --variant seq_read,rand_read
  iopath micro fs --remote --variant contention --procs 1..8
  iopath micro fs --quick --reps 6";

pub const COMPLETIONS: &str = "\
Examples:
  iopath completions bash                           # now `iopath man --completions bash`";

pub const MAN: &str = "\
Examples:
  iopath man | man -l -                             # read iopath(1) now
  iopath man -o /usr/local/share/man/man1           # iopath.1, iopath-net-stream.1, ...
  iopath man --completions bash > ~/.local/share/bash-completion/completions/iopath
  iopath man --completions zsh > ~/.zfunc/_iopath   # with fpath=(~/.zfunc $fpath) in .zshrc
  iopath man --completions fish > ~/.config/fish/completions/iopath.fish";
