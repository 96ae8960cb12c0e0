#!/bin/sh
# Runs mpi_failure under mpirun and passes when the job ends by itself within the limit, with a
# failing exit status and, for "throw", the failing rank's message: never a hang, never success.
#   mpi_failure.sh LIMIT_SECONDS MODE mpirun ARGS... -- PROGRAM
limit=$1 mode=$2
shift 2
out=$(mktemp)
start=$(date +%s)
timeout -s KILL "$limit" "$@" "$mode" >"$out" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
if [ "$status" -eq 137 ] && [ "$elapsed" -ge "$limit" ]; then
  echo "FAIL: the job was still running after ${limit} s (a rank left the others waiting)"; exit 1
fi
if [ "$status" -eq 0 ]; then echo "FAIL: the job succeeded although rank 1 failed"; exit 1; fi
if grep -q "finished, which it must not" "$out"; then
  echo "FAIL: a rank went past the failed one"; exit 1
fi
if [ "$mode" = throw ] && ! grep -q "rank 1 failed on purpose" "$out"; then
  echo "FAIL: the failing rank's message is not in the output"; exit 1
fi
rm -f "$out"
echo "PASS: the job ended in ${elapsed} s with status ${status}"
