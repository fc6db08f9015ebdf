#!/bin/sh
# expect_job_failure.sh SECONDS [--within SECONDS] [--expect REGEX] COMMAND...: passes (exit 0) when COMMAND, an MPI
# job in which rank 1 fails on purpose, really started (rank 1 printed its marker "rank 1: failing on purpose") and
# then exited non-zero within SECONDS (and, with --within, within that many seconds of the marker; with --expect,
# printed a line matching REGEX). Fails when the job succeeds, hangs (timeout's status 124, or still running at the
# limit), ends too long after the marker, or never got as far as the planned failure (e.g. mpirun refused to start).
limit="$1"
shift
within=""
expect=""
while [ $# -gt 0 ]; do
  case "$1" in
    --within) within="$2"; shift 2 ;;
    --expect) expect="$2"; shift 2 ;;
    *) break ;;
  esac
done
log=$(mktemp)
start=$(date +%s)
timeout -k 10 "$limit" "$@" >"$log" 2>&1 &
job=$!
marked=""
if [ -n "$within" ]; then
  # the time the marker appears (polled every 50 ms), in milliseconds
  while kill -0 "$job" 2>/dev/null; do
    if grep -q "rank 1: failing on purpose" "$log"; then
      marked=$(($(date +%s%N) / 1000000))
      break
    fi
    sleep 0.05
  done
fi
wait "$job"
status=$?
ended=$(($(date +%s%N) / 1000000))
elapsed=$(($(date +%s) - start))
cat "$log"
started=0
grep -q "rank 1: failing on purpose" "$log" && started=1
mv "$log" "$log.copy"
if [ "$started" -ne 1 ]; then
  rm -f "$log.copy"
  echo "expect_job_failure: rank 1 never reached its planned failure (status $status)" >&2
  exit 1
fi
if [ "$status" -eq 0 ]; then
  rm -f "$log.copy"
  echo "expect_job_failure: the job succeeded, but a rank was made to fail" >&2
  exit 1
fi
# 124: timeout's status; mpirun's own 137 (a rank killed by SIGKILL) is a failure, not a hang, unless
# it came from timeout's follow-up KILL at the limit
if [ "$status" -eq 124 ] || [ "$elapsed" -ge "$limit" ]; then
  rm -f "$log.copy"
  echo "expect_job_failure: the job did not end within ${limit}s (hang)" >&2
  exit 1
fi
if [ -n "$within" ]; then
  # the marker was printed before the job ended; when the poll missed it (the job ended first), the
  # end itself bounds the time since the marker by the poll interval
  [ -n "$marked" ] || marked=$ended
  after=$((ended - marked))
  if [ "$after" -gt $((within * 1000)) ]; then
    rm -f "$log.copy"
    echo "expect_job_failure: the job ended ${after} ms after rank 1's failure, more than ${within}s" >&2
    exit 1
  fi
fi
if [ -n "$expect" ] && ! grep -qE "$expect" "$log.copy"; then
  echo "expect_job_failure: the job failed, but its output lacks the expected message /$expect/" >&2
  rm -f "$log.copy"
  exit 1
fi
rm -f "$log.copy"
echo "expect_job_failure: the job failed as expected with status $status after ${elapsed}s${marked:+ ($((ended - marked)) ms after the failure)}"
exit 0
