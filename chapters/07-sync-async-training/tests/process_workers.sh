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
#     told to SIGKILL itself is survived (scripts/cluster's test runs it across two hosts).
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

for case in ps-async ps-ssp ps-async-tcp; do
  mode=${case%-tcp} extra=""
  [ "$case" != "$mode" ] && extra="--hostfile $dir/hosts"
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
print(f"{sys.argv[2]}: a worker process killed, {lost:.0f} lost, test accuracy {acc:.3f}")
PY
done
rm -rf "$dir"
echo "PASS"
