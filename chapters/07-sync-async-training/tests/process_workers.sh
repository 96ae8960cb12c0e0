#!/bin/sh
# The parameter server with worker processes (--backend processes):
#  1. one worker process takes exactly the steps one worker thread takes (the same final
#     checkpoint, byte for byte: the gradient is computed in another process, nothing else);
#  2. a worker process killed with SIGKILL in the middle of the run (--fail-worker 1:30: the
#     server sends the signal after that worker's 30th gradient) is dropped, its batch goes to
#     another worker, and the run finishes every epoch with every sample, and learns;
#  3. the same over TCP, as across hosts (--hostfile, each worker started through a remote shell
#     that connects back to the server), with local_agent.sh for ssh and this machine for every
#     host: one worker's checkpoint is again the worker thread's, byte for byte, and a worker
#     told to SIGKILL itself is survived (scripts/cluster's test runs it across two hosts);
#  4. the shards as processes of their own (--server-hosts 1: two shards on the first host, the
#     workers on the second, each worker pulling from and pushing to every shard): one worker's
#     checkpoint is the worker thread's, byte for byte (with --push-pull too); a worker killed is
#     survived (with --push-pull too); a shard
#     killed ends the run with an error naming it (it held the only copy of its parameters), and
#     no worker or shard process is left behind.
#   process_workers.sh CONCURDL WORKDIR
set -u
concurdl=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir" || exit 1
common="train --epochs 1 --train-limit 3000 --test-limit 500 --quiet --no-report --out $dir"

$concurdl $common --mode ps-async --ranks 1 --backend threads --checkpoint "$dir/threads.ckpt" >/dev/null ||
  { echo "FAIL: the worker-thread run failed"; exit 1; }
$concurdl $common --mode ps-async --ranks 1 --backend processes --checkpoint "$dir/processes.ckpt" >/dev/null ||
  { echo "FAIL: the worker-process run failed"; exit 1; }
if ! cmp "$dir/threads.ckpt" "$dir/processes.ckpt"; then
  echo "FAIL: one worker process did not take the steps one worker thread takes"; exit 1
fi

printf '127.0.0.1 slots=2\nlocalhost  # a comment\n\n' > "$dir/hosts"
export CONCURDL_RSH="$(cd "$(dirname "$0")" && pwd)/local_agent.sh"
$concurdl $common --mode ps-async --ranks 1 --backend processes --hostfile "$dir/hosts" \
  --checkpoint "$dir/tcp.ckpt" >/dev/null || { echo "FAIL: the worker-process run over TCP failed"; exit 1; }
if ! cmp "$dir/threads.ckpt" "$dir/tcp.ckpt"; then
  echo "FAIL: one worker process over TCP did not take the steps one worker thread takes"; exit 1
fi

$concurdl $common --mode ps-async --ranks 1 --backend processes --hostfile "$dir/hosts" \
  --server-hosts 1 --servers 2 --checkpoint "$dir/shards.ckpt" >/dev/null ||
  { echo "FAIL: the run with shard processes failed"; exit 1; }
if ! cmp "$dir/threads.ckpt" "$dir/shards.ckpt"; then
  echo "FAIL: one worker on two shard processes did not take the steps one worker thread takes"; exit 1
fi
# --push-pull: alone, the parameters a push brings back are those a pull would have read.
$concurdl $common --mode ps-async --ranks 1 --backend processes --hostfile "$dir/hosts" \
  --server-hosts 1 --servers 2 --push-pull --checkpoint "$dir/push-pull.ckpt" >/dev/null ||
  { echo "FAIL: the run with --push-pull failed"; exit 1; }
if ! cmp "$dir/threads.ckpt" "$dir/push-pull.ckpt"; then
  echo "FAIL: one worker with --push-pull did not take the steps one worker thread takes"; exit 1
fi

for case in ps-async ps-ssp ps-async-tcp ps-async-shards ps-async-pushpull; do
  mode=${case%-tcp} extra=""
  mode=${mode%-shards}
  mode=${mode%-pushpull}
  [ "$case" = ps-async-tcp ] && extra="--hostfile $dir/hosts"
  [ "$case" = ps-async-shards ] && extra="--hostfile $dir/hosts --server-hosts 1 --servers 2"
  [ "$case" = ps-async-pushpull ] && extra="--hostfile $dir/hosts --server-hosts 1 --servers 2 --push-pull"
  out=$($concurdl train --mode $mode --backend processes --ranks 3 --fail-worker 1:30 --epochs 2 \
        $extra --train-limit 12000 --test-limit 1000 --quiet --no-report --out "$dir/$case") ||
    { echo "FAIL: $case: the run did not survive a killed worker process"; exit 1; }
  /usr/bin/python3 - "$out/results.json" "$case" <<'PY' || exit 1
import json, sys
records = json.load(open(sys.argv[1]))["records"]
last = records[-1]
lost = last["derived"].get("workers_lost")
samples = last["derived"].get("samples_per_s", 0) > 0
acc = last["median"]
if lost != 1:
    sys.exit(f"FAIL: {sys.argv[2]}: workers_lost is {lost}, not 1")
if acc < 0.6:
    sys.exit(f"FAIL: {sys.argv[2]}: test accuracy {acc} after 2 epochs: it did not learn")
shards = last["derived"].get("shard_processes", 0)
if sys.argv[2].endswith(("-shards", "-pushpull")) and shards != 2:
    sys.exit(f"FAIL: {sys.argv[2]}: shard_processes is {shards}, not 2")
print(f"{sys.argv[2]}: a worker process killed, {lost:.0f} lost, test accuracy {acc:.3f}")
PY
done

# A shard killed (SIGKILL, once both workers are running: each holds a socket to the server and
# one to each shard): the run must end, naming the shard, and every process of the run must be
# gone within moments (a worker learns it from its sockets; one still starting, from a refused
# connection).
descendants() { for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
# A concurdl process's command line (not a shell that runs one); empty for anything else.
concurdl_args() {
  case "$(tr '\0' '\n' </proc/$1/cmdline 2>/dev/null | head -n1)" in
    */concurdl) tr '\0' ' ' </proc/$1/cmdline 2>/dev/null ;;
  esac
}
sockets() { ls -l /proc/$1/fd 2>/dev/null | grep -c 'socket:'; }
$concurdl train --mode ps-async --backend processes --ranks 2 --hostfile "$dir/hosts" \
  --server-hosts 1 --servers 2 --epochs 20 --train-limit 12000 --test-limit 1000 --quiet \
  --no-report --out "$dir/shard-kill" 2>"$dir/shard-kill.err" >/dev/null &
run=$!
shard="" tries=0
while [ -z "$shard" ] && [ $tries -lt 1200 ]; do
  sleep 0.1
  tries=$((tries + 1))
  seen=$(descendants $run)
  running=0 candidate=""
  for p in $seen; do
    case "$(concurdl_args $p)" in
      *" ps-worker "*) [ "$(sockets $p)" -ge 3 ] && running=$((running + 1)) ;;
      *" ps-shard "*" --shard 1 "*) candidate=$p ;;
    esac
  done
  [ $running -eq 2 ] && shard=$candidate
done
[ -n "$shard" ] || { kill $run; echo "FAIL: the run's two workers and shard 1 were not seen running"; exit 1; }
sleep 0.5
kill -KILL "$shard"
wait $run
rc=$?
if [ $rc -eq 0 ] || ! grep -q "parameter-server shard 1 (on host 127.0.0.1) is gone" "$dir/shard-kill.err"; then
  echo "FAIL: a killed shard did not end the run naming it (exit $rc):"; cat "$dir/shard-kill.err"; exit 1
fi
alive() { [ -d /proc/$1 ] && [ "$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null)" != Z ]; }
for p in $seen; do
  waited=0
  while alive $p && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
  if alive $p; then
    echo "FAIL: process $p ($(tr '\0' ' ' </proc/$p/cmdline)) outlived the run by 10 s"; exit 1
  fi
done
echo "a shard killed: the run ended (exit $rc): $(grep -o 'parameter-server shard.*' "$dir/shard-kill.err" | head -1)"
rm -rf "$dir"
echo "PASS"
