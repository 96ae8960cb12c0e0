#!/bin/sh
# A synchronous run killed with SIGKILL in the middle of an epoch, resumed from its last
# checkpoint, ends with the same checkpoint, byte for byte, as the same run left alone.
#   kill_resume.sh CONCURDL WORKDIR
# Fails on any difference, on a run that fails, or on a kill that came too late to matter.
set -u
concurdl=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir" || exit 1
args="train --ranks 2 --mode sync --epochs 3 --train-limit 24000 --test-limit 500 --quiet --no-report --out $dir"

# The run left alone.
$concurdl $args --checkpoint "$dir/alone.ckpt" >/dev/null || { echo "FAIL: the uninterrupted run failed"; exit 1; }

# The same run, killed once its first checkpoint is written (after epoch 1), during epoch 2.
$concurdl $args --checkpoint "$dir/killed.ckpt" >/dev/null 2>&1 &
pid=$!
i=0
while [ ! -f "$dir/killed.ckpt" ]; do
  i=$((i + 1))
  if [ $i -gt 3000 ]; then kill -KILL $pid; echo "FAIL: no checkpoint after 60 s"; exit 1; fi
  if ! kill -0 $pid 2>/dev/null; then echo "FAIL: the run ended before it could be killed"; exit 1; fi
  sleep 0.02
done
kill -KILL $pid
wait $pid 2>/dev/null
status=$?
if [ $status -ne 137 ]; then
  echo "FAIL: the run was not killed mid-run (status $status; it finished first?)"; exit 1
fi
if cmp -s "$dir/killed.ckpt" "$dir/alone.ckpt"; then
  echo "FAIL: the killed run had already reached the end"; exit 1
fi

# Resumed from what the kill left: the last complete checkpoint (atomic writes: never half of one).
$concurdl $args --resume "$dir/killed.ckpt" --checkpoint "$dir/killed.ckpt" >/dev/null ||
  { echo "FAIL: the resumed run failed"; exit 1; }
if ! cmp "$dir/killed.ckpt" "$dir/alone.ckpt"; then
  echo "FAIL: the resumed run's final checkpoint differs from the uninterrupted run's"; exit 1
fi
rm -rf "$dir"
echo "PASS: killed with SIGKILL after epoch 1's checkpoint, resumed, the same final checkpoint"
