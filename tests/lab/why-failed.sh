#!/bin/sh
# why-failed.sh TITLE LOG: append to $GPUCLUSTER_FAILURES (default .build/test-failures.txt) the title of a failed
# run and the last lines of its log that say why (Ansible's fatal/failed lines, pytest's E lines, molecule's
# CRITICAL/ERROR). `make test` prints that file after its phase timings, so the end of a CI log names the failure even
# when the run's own output scrolled past (a CI summary shows only the last few dozen lines).
title=$1
log=$2
out=${GPUCLUSTER_FAILURES:-$(dirname "$0")/../../.build/test-failures.txt}
mkdir -p "$(dirname "$out")"
{
  echo "FAIL  $title (log: $log)"
  if [ -r "$log" ]; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" \
      | grep -E '(fatal|failed): \[|FAILED!|^E {3}|(CRITICAL|ERROR) |Traceback|AssertionError|Error: ' \
      | tail -n 8 | cut -c1-400 | sed 's/^/      /'
  else
    echo "      (no log)"
  fi
} >>"$out"
