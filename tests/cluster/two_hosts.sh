#!/usr/bin/env bash
# Two simulated hosts (scripts/cluster) and the suite across them: a hierarchical all-reduce and
# the flat ones at 2 ranks a host (ch05/allreduce_hosts, every result checked), a 2-rank
# all-reduce and a 2-rank data-parallel training step with one rank a host, each run's
# provenance placing its ranks on both hosts, the parameter server on one host with worker
# processes on both, one of them killed, and again with the shards as processes on one host and
# the workers on the other; then `down` leaving no namespace, link, file or
# process of the cluster behind. It also checks that the same `up` twice is a no-op and that `up`
# refuses what it must (another cluster, a subnet in use, a bad count).
#
#   tests/cluster/two_hosts.sh CONCURDL PYTHON3 WORKDIR     (ctest runs it as cluster.two_hosts)
#
# Skipped (exit 77) where namespaces cannot be made: not root, no iproute2 or unshare, or a
# kernel or container that refuses `ip netns add`. Its cluster has a prefix and subnet of its
# own (cdt, 10.213.8.0/24), so that it never meets a user's (cdl, 10.213.7.0/24).
set -euo pipefail
concurdl=$1 python3=$2 work=$3
src="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="$src/scripts/cluster"
export CONCURDL_CLUSTER_PREFIX=cdt CONCURDL_CLUSTER_SUBNET=10.213.8
export CONCURDL_CLUSTER_DIR="$work/cluster"

skip() { echo "cluster.two_hosts: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
for tool in ip tc unshare; do command -v $tool > /dev/null || skip "no $tool"; done
if ! ip netns add cdt-probe 2> /dev/null; then skip "this kernel or container refuses ip netns add"; fi
ip netns del cdt-probe

fail() { echo "cluster.two_hosts: FAILED: $*" >&2; exit 1; }
leftovers() {
  { ip netns list | awk '{print $1}' | grep '^cdt-' || true
    ip -br link | awk '{print $1}' | grep '^cdt-' || true
    [ ! -e "$CONCURDL_CLUSTER_DIR" ] || echo "$CONCURDL_CLUSTER_DIR"; } | tr '\n' ' '
}
trap '"$cluster" down > /dev/null 2>&1 || true' EXIT
rm -rf "$work"
mkdir -p "$work"
"$cluster" down > /dev/null

# Refusals: one line, exit 2, and nothing made.
expect_refusal() {
  local what=$1; shift
  set +e
  "$@" > "$work/refusal.out" 2>&1
  local rc=$?
  set -e
  [ $rc = 2 ] || fail "$what: exit $rc, not 2 ($(cat "$work/refusal.out"))"
  [ -z "$(leftovers)" ] || fail "$what left $(leftovers)"
  echo "refused as it should ($what): $(head -1 "$work/refusal.out")"
}
expect_refusal "no hosts" "$cluster" up 0
expect_refusal "a bad rate" "$cluster" up 2 --link-gbit fast
own=$(ip -4 -o addr show scope global | awk '{split($4, a, "."); print a[1] "." a[2] "." a[3]; exit}')
if [ -n "$own" ]; then
  expect_refusal "this machine's own subnet" env CONCURDL_CLUSTER_SUBNET="$own" "$cluster" up 2
fi

"$cluster" up 2 --link-gbit 10 --slots 2
"$cluster" up 2 --link-gbit 10 --slots 2 > "$work/again.out"
grep -q "already up as asked" "$work/again.out" || fail "the same up twice: $(cat "$work/again.out")"
expect_refusal_up() {  # another `up` must leave the first cluster as it was
  set +e
  "$cluster" up 2 > "$work/refusal.out" 2>&1
  local rc=$?
  set -e
  [ $rc = 2 ] || fail "another up: exit $rc, not 2"
  echo "refused as it should (another up): $(head -1 "$work/refusal.out")"
}
expect_refusal_up
"$cluster" status > "$work/status"
[ "$(grep -c '^cdt-h' "$work/status")" = 2 ] || fail "status does not list 2 hosts"
[ "$(grep -c 'cap 10Gbit' "$work/status")" = 2 ] || fail "the links are not capped: $(cat "$work/status")"
eval "$("$cluster" env)"
hostfile=$CONCURDL_CLUSTER_HOSTFILE
awk '{print $1 " slots=1"}' "$hostfile" > "$work/one-a-host"

# The placement each run recorded: every host named, its ranks, TCP between them.
placement_check() {  # RESULTS.JSON HOSTS RANKS_A_HOST KEY_PATH
  "$python3" - "$@" << 'PY'
import json, sys
path, hosts, per_host, where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
node = json.load(open(path))["provenance"]
for key in where.split("."):
    node = node[key]
got = [h["ranks"] for h in node["hosts"]]
want = [list(range(h * per_host, (h + 1) * per_host)) for h in range(hosts)]
if got != want:
    sys.exit(f"{path}: ranks by host {got}, expected {want}")
addresses = {h["address"] for h in node["hosts"]}
if len(addresses) != hosts or not all(a.startswith("10.213.8.") for a in addresses):
    sys.exit(f"{path}: host addresses {sorted(addresses)}")
if not node["transport"]["between_hosts"].startswith("tcp"):
    sys.exit(f"{path}: between hosts: {node['transport']['between_hosts']}")
print(f"placement: {got} on {sorted(addresses)}; between hosts {node['transport']['between_hosts']}")
PY
}

# 4 ranks, 2 a host: the hierarchical all-reduce beside the flat ones, every result checked.
"$concurdl" run --ranks 4 --hostfile "$hostfile" ch05/allreduce_hosts --profile smoke \
  --set bytes=4K,64K --no-calibrate --no-report --quiet --out "$work/hosts"
placement_check "$work"/hosts/*/results.json 2 2 mpi_placement

# 2 ranks, 1 a host: the host experiment's rows that need two ranks on a host (p2p_local) are
# left out with their reason, in the provenance, and the rest measured (no abort of the job).
"$concurdl" run --ranks 2 --hostfile "$work/one-a-host" ch05/allreduce_hosts --profile smoke \
  --set bytes=4K --no-calibrate --no-report --quiet --out "$work/hosts-one"
"$python3" - "$work"/hosts-one/*/results.json << 'PY'
import json, sys
run = json.load(open(sys.argv[1]))
skipped = [s for s in run["provenance"].get("skipped_experiments", [])
           if "p2p_local" in s["experiment"]]
if not skipped or "alone on its host" not in skipped[0]["reason"]:
    sys.exit(f"p2p_local was not skipped with its reason: {run['provenance'].get('skipped_experiments')}")
measured = {r["params"]["algorithm"] for r in run["records"] if r["experiment"] == "ch05/allreduce_hosts"}
if "p2p_local" in measured or "p2p_cross" not in measured or not all(
        r["valid"] for r in run["records"]):
    sys.exit(f"measured {sorted(measured)}")
print(f"one rank a host: p2p_local skipped ({skipped[0]['reason']}); measured {sorted(measured)}")
PY

# 2 ranks, 1 a host: a flat all-reduce, and one epoch of data-parallel training on a few batches.
"$concurdl" run --ranks 2 --hostfile "$work/one-a-host" ch05/allreduce_mpi --profile smoke \
  --set algorithm=v4_ring,native --set bytes=4K,1M --no-calibrate --no-report --quiet \
  --out "$work/flat"
placement_check "$work"/flat/*/results.json 2 1 mpi_placement
data=${CONCURDL_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -e "$data/train-images-idx3-ubyte.gz" ]; then
  "$concurdl" train --ranks 2 --backend mpi --hostfile "$work/one-a-host" --epochs 1 \
    --train-limit 1024 --test-limit 256 --threads 1 --no-report --quiet --out "$work/train" > /dev/null
  placement_check "$work"/train/*/results.json 2 1 training.data_parallel.mpi_placement
else
  echo "training step: skipped (no Fashion-MNIST at $data)"
fi

# The parameter server on host 1, its 3 worker processes on hosts 1, 2, 1 over TCP, worker 1 (on
# host 2) killed after 20 gradients: the run finishes its epoch without it.
if [ -e "$data/train-images-idx3-ubyte.gz" ]; then
  out=$("$cluster" on 1 "$concurdl" train --mode ps-async --backend processes --ranks 3 \
    --hostfile "$work/one-a-host" --fail-worker 1:20 --epochs 1 --train-limit 8192 \
    --test-limit 256 --no-report --quiet --out "$work/ps")
  "$python3" - "$out/results.json" << 'PY'
import json, sys
run = json.load(open(sys.argv[1]))
trainer = run["provenance"]["training"]["data_parallel"]["trainer"]
lost = run["records"][-1]["derived"].get("workers_lost")
if "TCP, on hosts 10.213.8.11, 10.213.8.12" not in trainer:
    sys.exit(f"the workers did not run across both hosts: {trainer}")
if lost != 1:
    sys.exit(f"workers_lost is {lost}, not 1")
print(f"ps-async across hosts: {trainer}; a worker killed, the run finished")
PY
  # The shards as processes on host 1 (--server-hosts 1), the 2 workers on host 2 pulling from
  # and pushing to them across the link, worker 1 killed: the run finishes its epoch.
  out=$("$cluster" on 1 "$concurdl" train --mode ps-async --backend processes --ranks 2 \
    --hostfile "$work/one-a-host" --server-hosts 1 --servers 2 --fail-worker 1:20 --epochs 1 \
    --train-limit 8192 --test-limit 256 --no-report --quiet --out "$work/ps-shards")
  "$python3" - "$out/results.json" << 'PY'
import json, sys
run = json.load(open(sys.argv[1]))
trainer = run["provenance"]["training"]["data_parallel"]["trainer"]
derived = run["records"][-1]["derived"]
if "TCP, on host 10.213.8.12" not in trainer or "2 shard processes on host 10.213.8.11" not in trainer:
    sys.exit(f"the shards and workers did not run on their own hosts: {trainer}")
if derived.get("workers_lost") != 1 or derived.get("shard_processes") != 2:
    sys.exit(f"workers_lost {derived.get('workers_lost')}, shard_processes {derived.get('shard_processes')}")
print(f"ps-async, shards on their own host: {trainer}; a worker killed, the run finished")
PY
fi

# Every run has ended: no process is left in the hosts (Open MPI's daemons went with mpirun).
for ns in cdt-h1 cdt-h2; do
  [ -z "$(ip netns pids "$ns")" ] || fail "processes left in $ns: $(ip netns pids "$ns" | tr '\n' ' ')"
done
"$cluster" down
[ -z "$(leftovers)" ] || fail "down left $(leftovers)"
echo "down left no namespace, link or file of the cluster"
