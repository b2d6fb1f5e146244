#!/usr/bin/env bash
# Builds and runs an external OpenSHMEM test suite against this library, as a user would
# (oshcc / oshc++ / oshrun), and prints the result of each program. Not part of `make test`:
# the suite is not in this repository. Written for the OpenSHMEM organisation's tests-sos
# (https://github.com/openshmem-org/tests-sos): its test/unit and test/spec-example programs.
#
#   scripts/run_conformance.sh /path/to/tests-sos [NP] [oshrun options, e.g. --hosts 2]
#
# Each program runs on NP PEs (default 2) with a 90 s limit; exit status 0 is a pass. Programs
# that need MPI (hybrid_*) or are helpers without main (mt_lock.c) are reported as not built.
set -uo pipefail
suite=${1:?the tests-sos checkout}
np=${2:-2}
shift $(( $# >= 2 ? 2 : $# ))
work=$(mktemp -d /tmp/conformance.XXXXXX)
pass=0; fail=0; nobuild=0
for src in "$suite"/test/unit/*.c "$suite"/test/unit/*.cpp "$suite"/test/spec-example/*.c; do
  [ -e "$src" ] || continue
  name=$(basename "$src"); exe="$work/${name%.*}"
  extra=()
  [ "$name" = mt_lock_test.c ] && extra=("$suite/test/unit/mt_lock.c")
  if [[ "$src" == *.cpp ]]; then
    oshc++ -O1 -w -I"$suite/test/include" -o "$exe" "$src" > "$exe.build.log" 2>&1
  else
    oshcc -std=gnu11 -O1 -w -DENABLE_PTHREADS -I"$suite/test/include" -pthread -o "$exe" "$src" "${extra[@]}" -lm \
      > "$exe.build.log" 2>&1
  fi
  if [ $? -ne 0 ]; then echo "NOT BUILT  $name"; nobuild=$((nobuild + 1)); continue; fi
  HYPER_PARALLEL_SHMEM_TIMEOUT_SEC=30 timeout 90 oshrun -np "$np" "$@" "$exe" > "$exe.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass + 1)); else echo "FAIL ($rc)  $name  (log: $exe.log)"; fail=$((fail + 1)); fi
done
echo "passed $pass, failed $fail, not built $nobuild (np=$np $*)"
[ $fail -eq 0 ]
