#!/bin/sh
# expect_job_failure.sh SECONDS COMMAND...: passes (exit 0) when COMMAND, an MPI job in which rank 1
# fails on purpose, really started (rank 1 printed its marker) and then exited non-zero within
# SECONDS. Fails when the job succeeds, hangs (timeout's status 124, or 137 after the follow-up KILL),
# or never got as far as the planned failure (e.g. mpirun refused to start).
limit="$1"
shift
log=$(mktemp)
timeout -k 10 "$limit" "$@" >"$log" 2>&1
status=$?
cat "$log"
started=0
grep -q "rank 1: failing on purpose" "$log" && started=1
rm -f "$log"
if [ "$started" -ne 1 ]; then
  echo "expect_job_failure: rank 1 never reached its planned failure (status $status)" >&2
  exit 1
fi
if [ "$status" -eq 0 ]; then
  echo "expect_job_failure: the job succeeded, but a rank was made to fail" >&2
  exit 1
fi
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "expect_job_failure: the job did not end within ${limit}s (hang)" >&2
  exit 1
fi
echo "expect_job_failure: the job failed as expected with status $status"
exit 0
