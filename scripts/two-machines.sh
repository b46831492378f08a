#!/usr/bin/env bash
# Runs topologies/two-machines.toml as two machines on one Linux box: a network namespace per
# machine (op-a: 10.77.0.1, op-b: 10.77.0.2), joined by a veth cable, so that every datagram
# between the machines crosses a real interface and the kernel's IP routing, not loopback.
# Machine B's switches and processes run their clocks ahead by --skew-us (default 2000), as an
# unsynchronized machine would; `onepipe inspect` should find that skew through the links.
#
# Each machine runs its own switches (`onepipe switch`) and processes (the examples): one
# broadcaster and one printer per machine, reliable. Checks: both printers deliver every
# broadcast, in one and the same order, in timestamp order; no process or namespace is left.
#
# Faults between the machines: --loss P and --corrupt P make every switch drop, or flip one
# bit of, each datagram it receives with probability P (our own injection: no tc/netem here);
# --cut-ms MS takes the cable down for MS milliseconds in the middle of the traffic (a
# partition; longer than the switches' dead-link timeout, 0.5 s, the links die and rejoin).
#
#   sudo scripts/two-machines.sh [--count N] [--rate R] [--skew-us US] [--keep DIR] [--debug]
#                                [--no-build] [--loss P] [--corrupt P] [--cut-ms MS]
#
# Needs root (namespaces), iproute2 and a Rust toolchain; builds the binaries first (release,
# or with --debug the debug ones that `cargo test` builds anyway, as CI does; --no-build runs
# what is there, for a root without cargo).
set -euo pipefail
cd "$(dirname "$0")/.."

count=2000
rate=2000
skew_us=2000
keep=""
profile=release
build=yes
loss=0
corrupt=0
cut_ms=0
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --skew-us) skew_us="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --debug) profile=debug; shift ;;
    --no-build) build=""; shift ;;
    --loss) loss="$2"; shift 2 ;;
    --corrupt) corrupt="$2"; shift 2 ;;
    --cut-ms) cut_ms="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "needs root to create network namespaces: sudo $0" >&2
  exit 2
fi
command -v ip >/dev/null || { echo "needs iproute2 (ip)" >&2; exit 2; }

topology=topologies/two-machines.toml
release=()
[ "$profile" = release ] && release=(--release)
[ -n "$build" ] && cargo build "${release[@]}" --quiet -p onepipe-cli --bin onepipe --example broadcast --example print
bin=target/$profile
for b in onepipe examples/broadcast examples/print; do
  [ -x "$bin/$b" ] || { echo "$bin/$b is not built (cargo build ${release[*]} -p onepipe-cli --examples)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/onepipe-two-machines.XXXXXX)
mkdir -p "$work/status"
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del op-a 2>/dev/null || true
  ip netns del op-b 2>/dev/null || true
  if [ -n "$keep" ]; then
    mkdir -p "$keep" && cp -r "$work"/. "$keep"/ && echo "outputs kept in $keep"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== two machines: namespaces op-a (10.77.0.1) and op-b (10.77.0.2), one veth cable"
ip netns del op-a 2>/dev/null || true
ip netns del op-b 2>/dev/null || true
ip netns add op-a
ip netns add op-b
ip link add op-a0 netns op-a type veth peer name op-b0 netns op-b
ip -n op-a addr add 10.77.0.1/24 dev op-a0
ip -n op-b addr add 10.77.0.2/24 dev op-b0
for ns in op-a op-b; do
  ip -n "$ns" link set lo up
done
ip -n op-a link set op-a0 up
ip -n op-b link set op-b0 up

# on MACHINE CMD...: runs CMD in that machine's namespace, in the background.
on() {
  local ns="$1"; shift
  ip netns exec "$ns" "$@" &
  pids+=($!)
}

echo "== switches: tor0 on A; tor1 and spine on B, clocks ${skew_us} us ahead"
inject=(--inject-loss "$loss" --inject-corrupt "$corrupt")
if [ "$loss" != 0 ] || [ "$corrupt" != 0 ]; then
  echo "   each drops a received datagram with probability $loss, flips a bit of one with $corrupt"
fi
# Each switch says what it forwarded when it stops; into a file of its own, not interleaved.
on op-a "$bin/onepipe" switch --topology "$topology" --node tor0 --status-file "$work/status/tor0.json" \
  "${inject[@]}" 2>"$work/switch-tor0.log"
for s in tor1 spine; do
  on op-b "$bin/onepipe" switch --topology "$topology" --node "$s" \
    --status-file "$work/status/$s.json" --clock-offset-us "$skew_us" "${inject[@]}" 2>"$work/switch-$s.log"
done
sleep 1

echo "== processes: printers 1 (A) and 3 (B); broadcasters 0 (A) and 2 (B), $count each at $rate/s"
on op-a "$bin/examples/print" --topology "$topology" --process 1 --reliable >"$work/print-1.txt"
printer_a=$!
on op-b "$bin/examples/print" --topology "$topology" --process 3 --reliable \
  --clock-offset-us "$skew_us" >"$work/print-3.txt"
printer_b=$!
sleep 0.5
on op-a "$bin/examples/broadcast" --topology "$topology" --process 0 --reliable \
  --count "$count" --rate "$rate" >"$work/broadcast-0.txt"
sender_a=$!
on op-b "$bin/examples/broadcast" --topology "$topology" --process 2 --reliable \
  --count "$count" --rate "$rate" --clock-offset-us "$skew_us" >"$work/broadcast-2.txt"
sender_b=$!

sleep 0.5
# A route change under the running links: the cable now carries 1280-byte packets. Datagrams
# packed for 1500 are refused; each link cuts its datagrams to the new path, and reliable
# delivery sends again what the refused ones carried.
echo "== the cable's MTU drops from 1500 to 1280 under traffic"
ip -n op-a link set op-a0 mtu 1280
ip -n op-b link set op-b0 mtu 1280
sleep 0.5
if [ "$cut_ms" != 0 ]; then
  echo "== the cable between the machines goes down for $cut_ms ms under traffic"
  ip -n op-a link set op-a0 down
  sleep "$(awk -v ms="$cut_ms" 'BEGIN { print ms / 1000 }')"
  ip -n op-a link set op-a0 up
  sleep 0.5
fi
echo "== onepipe inspect (switch reports from both machines)"
# After a cut, the links between the machines come back once the controller readmits them
# (docs/failures.md, "Readmission"); under loss that can take past the half second above, and
# only links that are up join the two machines' clocks. Look again for up to 5 s.
for attempt in $(seq 1 10); do
  "$bin/onepipe" inspect "$topology" --status-dir "$work/status" >"$work/inspect.txt"
  if grep -q "^clock skew between processes: .*joined through" "$work/inspect.txt" || [ "$cut_ms" = 0 ]; then
    break
  fi
  sleep 0.5
done
cat "$work/inspect.txt"
[ "$attempt" -gt 1 ] && echo "(the links between the machines were back at inspect's attempt $attempt)"

wait "$sender_a"
wait "$sender_b"
kill -INT "$printer_a" "$printer_b"
wait "$printer_a" || true
wait "$printer_b" || true

echo "== checks"
cat "$work"/broadcast-*.txt
expected=$((2 * count))
failed=0
if grep -q "could not deliver" "$work"/broadcast-*.txt; then
  echo "a broadcaster was told that messages could not be delivered"
  failed=1
fi
for p in 1 3; do
  got=$(wc -l <"$work/print-$p.txt")
  echo "printer $p delivered $got of $expected messages"
  [ "$got" -eq "$expected" ] || failed=1
  # Delivery order is (timestamp, sender): each line's key is at least the previous one's.
  if ! sort -k1,1n -k2,2n -c "$work/print-$p.txt" 2>/dev/null; then
    echo "printer $p did not deliver in (timestamp, sender) order"
    failed=1
  fi
done
if cmp -s "$work/print-1.txt" "$work/print-3.txt"; then
  echo "both printers delivered the same messages in the same order"
else
  echo "the printers' deliveries differ"
  failed=1
fi
cuts=$(cat "$work"/status/*.json | grep -o '"path_mtu_cuts": *[0-9]*' | awk -F: '{ s += $2 } END { print s + 0 }')
echo "links cut to the smaller MTU: $cuts"
sum_counter() {
  cat "$work"/status/*.json | grep -o "\"$1\": *[0-9]*" | awk -F: '{ s += $2 } END { print s + 0 }'
}
if [ "$loss" != 0 ] || [ "$corrupt" != 0 ]; then
  echo "datagrams dropped by injection: $(sum_counter injected_losses), corrupted: $(sum_counter injected_corruptions), refused as malformed: $(sum_counter malformed), with a bad tag: $(sum_counter bad_tag)"
  if [ "$loss" != 0 ] && [ "$(sum_counter injected_losses)" -eq 0 ]; then
    echo "no datagram was dropped: the injection did not run"
    failed=1
  fi
fi
# The skew inspect measured, through the links between the machines, against the injected one
# (one-way delays differ by tens of microseconds here).
measured=$(sed -n 's/^clock skew between processes: \([0-9.]*\) us .*joined through.*/\1/p' "$work/inspect.txt")
if [ -z "$measured" ]; then
  echo "inspect did not measure the skew across the machines"
  failed=1
elif awk -v m="$measured" -v s="$skew_us" 'BEGIN { d = m - s; exit !(d < -200 - s / 10 || d > 200 + s / 10) }'; then
  echo "inspect measured $measured us of skew; ${skew_us} us was injected"
  failed=1
else
  echo "inspect measured $measured us of skew across the machines (${skew_us} injected)"
fi
[ "$failed" -eq 0 ] && echo "two-machines: pass" || { echo "two-machines: FAIL"; exit 1; }
