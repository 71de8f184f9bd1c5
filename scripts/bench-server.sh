#!/usr/bin/env bash
# Network benchmark: redis-benchmark against emberkv-server and against
# redis-server (appendonly yes, appendfsync everysec), each on a unix
# socket, the server pinned to one CPU and redis-benchmark to another
# (taskset). PING (a command that does no work: the ceiling of the client,
# socket and event-loop path), SET, GET, INCR and MSET (10 keys), 50
# clients, without and with -P 16, over 100,000 keys of 1 KiB, prefilled,
# then one unmeasured round of the tests (no pipelining) per server to warm
# up. The two servers are run alternately for ROUNDS rounds; each row
# reports the sustained rate (all rounds' requests over their total time,
# the harmonic mean of the rounds' rates), with the emberkv/redis ratio. Results are for
# docs/BENCHMARKS-server.md: network numbers never share a table with the
# embedded ones.
#
# Environment: ROUNDS (3), REQUESTS (200000), PIPE_REQUESTS (1000000),
# SERVER_CPU (0), CLIENT_CPU (1), OUT (bench-results/server.md),
# SERVER_CPU_SHARE (unset; a percentage, say 40: each server is also held
# to that share of its CPU by a cgroup CPU quota, so that the server, not
# the one-threaded client, sets the rate of the unpipelined rows: without
# it redis-benchmark's own CPU is saturated first; needs a writable cgroup
# cpu controller, v1 or v2).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"
ROUNDS="${ROUNDS:-3}"
REQUESTS="${REQUESTS:-200000}"
PIPE_REQUESTS="${PIPE_REQUESTS:-1000000}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
OUT="${OUT:-bench-results/server.md}"
CLIENTS=50
KEYS=100000
SIZE=1024
TESTS="ping_mbulk,set,get,incr,mset"
SERVER_CPU_SHARE="${SERVER_CPU_SHARE:-}"

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null \
    || ! command -v redis-cli >/dev/null; then
    echo "== installing redis-server and redis-tools"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }

echo "== building emberkv-server (release)"
cargo build --release -q -p emberkv-server
BIN="$CARGO_TARGET_DIR/release/emberkv-server"

work=$(mktemp -d /tmp/emberkv-bench-server.XXXXXX)
pids=()
cgroups=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for g in "${cgroups[@]}"; do rmdir "$g" 2>/dev/null || true; done
    rm -rf "$work"
}

# Holds process $2 (all its threads) to SERVER_CPU_SHARE % of one CPU, in
# a cgroup of its own named after $1.
cap() {
    local g quota=$((SERVER_CPU_SHARE * 1000))
    if [ -w /sys/fs/cgroup/cgroup.subtree_control ] \
        && grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        g=/sys/fs/cgroup/emberkv-bench-$1
        mkdir -p "$g"
        echo "$quota 100000" > "$g/cpu.max"
    elif [ -d /sys/fs/cgroup/cpu ]; then
        g=/sys/fs/cgroup/cpu/emberkv-bench-$1
        mkdir -p "$g"
        echo 100000 > "$g/cpu.cfs_period_us"
        echo "$quota" > "$g/cpu.cfs_quota_us"
    else
        echo "SERVER_CPU_SHARE needs a writable cgroup cpu controller" >&2
        exit 1
    fi
    cgroups+=("$g")
    echo "$2" > "$g/cgroup.procs"
}
trap cleanup EXIT
mkdir -p "$work/redis" "$work/emberkv"

taskset -c "$SERVER_CPU" redis-server --port 0 --unixsocket "$work/redis.sock" \
    --dir "$work/redis" --appendonly yes --appendfsync everysec --save "" \
    --daemonize no --logfile "$work/redis.log" &
pids+=($!)
[ -n "$SERVER_CPU_SHARE" ] && cap redis $!
taskset -c "$SERVER_CPU" "$BIN" --port 0 --unixsocket "$work/emberkv.sock" \
    --dir "$work/emberkv" --appendfsync everysec --logfile "$work/emberkv.log" &
pids+=($!)
[ -n "$SERVER_CPU_SHARE" ] && cap emberkv $!
for s in redis emberkv; do
    for _ in $(seq 100); do [ -S "$work/$s.sock" ] && break; sleep 0.1; done
    redis-cli -s "$work/$s.sock" ping >/dev/null
done

echo "== prefilling $KEYS keys of $SIZE bytes into each server"
value=$(head -c "$SIZE" /dev/zero | tr '\0' 'x')
awk -v n="$KEYS" -v v="$value" -v size="$SIZE" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$%d\r\n%s\r\n", i, size, v
}' > "$work/fill.resp"
for s in redis emberkv; do
    redis-cli -s "$work/$s.sock" --pipe < "$work/fill.resp" | tail -1
done

# One unmeasured round of the same tests against each server, without
# pipelining: each reaches the memory it keeps for these writes before any
# round counts (emberkv-server's hot tier grows from the 100 MB prefill to
# its 256 MiB as overwrites append, and on this VM first-touched memory
# cost its first SET round 0.7 s of CPU, a third of its 40 % share), and
# redis-server's AOF has grown past its first rewrite.
for s in redis emberkv; do
    echo "== warm-up, $s"
    taskset -c "$CLIENT_CPU" redis-benchmark -s "$work/$s.sock" -c "$CLIENTS" \
        -r "$KEYS" -d "$SIZE" -t "$TESTS" -n "$REQUESTS" -q >/dev/null
done

results="$work/results.csv"
echo "round,mode,server,test,rps" > "$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
    # Alternate which server goes first, so drift in the machine's load
    # does not favour one of them.
    if [ $((round % 2)) -eq 1 ]; then order="emberkv redis"; else order="redis emberkv"; fi
    for mode in plain pipelined; do
        if [ "$mode" = plain ]; then extra=(-n "$REQUESTS"); else extra=(-n "$PIPE_REQUESTS" -P 16); fi
        for s in $order; do
            echo "== round $round, $mode, $s"
            taskset -c "$CLIENT_CPU" redis-benchmark -s "$work/$s.sock" -c "$CLIENTS" \
                -r "$KEYS" -d "$SIZE" -t "$TESTS" "${extra[@]}" --csv \
                | tail -n +2 | tr -d '"' \
                | awk -F, -v r="$round" -v m="$mode" -v s="$s" '{print r "," m "," s "," $1 "," $2}' \
                >> "$results"
        done
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$(dirname "$OUT")"
python3 - "$results" "$OUT" "$load_before" "$load_after" "$ROUNDS" "$REQUESTS" "$PIPE_REQUESTS" "$SERVER_CPU_SHARE" <<'PY'
import csv, statistics, sys, subprocess, platform
path, out, before, after, rounds, req, preq, share = sys.argv[1:9]
rows = list(csv.DictReader(open(path)))
rate = {}
for mode in ("plain", "pipelined"):
    for test in dict.fromkeys(r["test"] for r in rows):
        for s in ("emberkv", "redis"):
            v = [float(r["rps"]) for r in rows if r["mode"] == mode and r["server"] == s and r["test"] == test]
            if v:
                # Every round sends the same number of requests, so the
                # harmonic mean is all of them over the rounds' total time:
                # a pause that comes once in a while (redis-server's AOF
                # rewrite, emberkv-server's compaction) counts at the rate
                # it comes, where a median of few rounds counts it in full
                # or not at all.
                rate[(mode, test, s)] = (statistics.harmonic_mean(v), min(v), max(v))
targets = {("plain", "SET"): 1.5, ("plain", "GET"): 1.0, ("pipelined", "SET"): 1.0, ("pipelined", "GET"): 1.0}
redis_v = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    f"redis-benchmark over unix sockets: 50 clients, 100,000 keys of 1 KiB (prefilled), "
    f"{req} requests per test ({preq} with -P 16), {rounds} alternating rounds, "
    f"after one unmeasured round of the same tests without pipelining against each server. "
    "Each rate is sustained: all rounds' requests over their total time (the harmonic mean "
    "of the rounds' rates), with the rounds' range in parentheses.",
    f"redis-server {redis_v} with appendonly yes, appendfsync everysec; emberkv-server with appendfsync everysec.",
    f"Machine: {cpu}, {platform.machine()}; server on one CPU, redis-benchmark on another; "
    f"load average {before} before, {after} after."
    + (f" Each server held to {share} % of its CPU by a cgroup CPU quota (its threads together), "
       "so that the server, not the client, sets the rate." if share else ""),
    "PING_MBULK does no work in either server: its rate is the ceiling that the client, the socket "
    "and each server's event loop allow, which bounds every other row.",
    "",
    "| mode | test | emberkv-server rps | redis-server rps | ratio | target |",
    "|------|------|-------------------:|-----------------:|------:|-------:|",
]
for (mode, test, s), (m, lo, hi) in rate.items():
    if s != "emberkv":
        continue
    r = rate.get((mode, test, "redis"))
    if not r:
        continue
    ratio = m / r[0]
    t = targets.get((mode, test.split()[0]))
    tgt = f">= {t:.1f}x {'met' if ratio >= t else 'MISSED'}" if t else ""
    label = "-P 16" if mode == "pipelined" else "no pipelining"
    lines.append(f"| {label} | {test} | {m:,.0f} ({lo:,.0f}..{hi:,.0f}) | {r[0]:,.0f} ({r[1]:,.0f}..{r[2]:,.0f}) | {ratio:.2f}x | {tgt} |")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PY
echo "== written to $OUT"
