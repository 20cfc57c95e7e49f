#!/bin/sh
# The Makefile's test runner (docs/testing.md "Two workers").
#
#   tools/pytest_parts.sh PYTHON WORKERS MARKEXPR [pytest arguments and paths...]
#
# WORKERS 0: one pytest process runs every test MARKEXPR selects, as plain pytest.
# WORKERS N > 0: two pytest calls, one after the other:
#   1. the parallel part, `-n N --dist loadfile -m '(MARKEXPR) and not timing'`; a worker
#      that dies ends the part (`--max-worker-restart=0`): its test is reported failed, and
#      the run goes on to the timing part. With a replacement worker pytest-xdist 3.8 (loadfile)
#      gave it no test and waited for ever (a CI run hung after a worker died; a run with a
#      test that called os._exit had not finished when a 300 s timeout ended it);
#   2. the timing part, `-m '(MARKEXPR) and timing'`, in one process with the machine to
#      itself: the tests that measure delivery timing, rates or latency, or pin a SCHED_FIFO
#      spinner to a CPU (the `timing` marker, setup.cfg). Beside another worker the
#      injector's zero-delay route measured a median of 17.6 ms against a 5 ms budget.
# Each part ends with pytest's 25 slowest phases (`--durations=25`), so a CI log says where
# its minutes went. Both parts always run, so one run reports every failure. pytest's exit
# code 5 (no test selected) of one part is not a failure (a path or tier may hold no timing
# test, or only timing tests); of both parts it is, like any other non-zero code. The status
# is the first part's failure, else the second's.
set -u
python=$1 workers=$2 expr=$3
shift 3
if [ "$workers" = 0 ]; then
  exec "$python" -m pytest -q -m "$expr" "$@"
fi
echo "pytest: the parallel part ($workers workers): -m '($expr) and not timing'"
"$python" -m pytest -q -n "$workers" --dist loadfile --max-worker-restart=0 --durations=25 \
  -m "($expr) and not timing" "$@"
a=$?
echo "pytest: the timing part (one process): -m '($expr) and timing'"
"$python" -m pytest -q --durations=25 -m "($expr) and timing" "$@"
b=$?
if [ "$a" = 5 ] && [ "$b" = 5 ]; then
  echo "pytest: no test selected in either part" >&2
  exit 5
fi
for code in "$a" "$b"; do
  if [ "$code" != 0 ] && [ "$code" != 5 ]; then
    exit "$code"
  fi
done
exit 0
