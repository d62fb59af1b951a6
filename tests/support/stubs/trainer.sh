#!/bin/sh
# A stand-in trainer inside the test image (busybox sh, no Python), installed as `record`
# and `axolotl`. It records what it got into .records/N/ of its working directory, where N
# counts the steps: its name, argv and the environment NUL-separated, the directory, then `ready`
# last, so a test that sees `ready` sees a whole record.
#
# `--exit N` exits with N; `--touch FILE` creates FILE; `--sleep S` waits S seconds (for
# signal tests), ending at once on TERM as a trainer that saves and quits would.
n=0
while [ -e ".records/$n" ] || [ -e ".records/$n.tmp" ]; do n=$((n + 1)); done
record=.records/$n
mkdir -p "$record.tmp"
printf '%s' "${0##*/}" > "$record.tmp/program"
: > "$record.tmp/argv"
[ "$#" -eq 0 ] || printf '%s\0' "$@" > "$record.tmp/argv"
env -0 > "$record.tmp/env"
pwd > "$record.tmp/cwd"
mv "$record.tmp" "$record"
: > "$record/ready"

status=0
while [ "$#" -gt 0 ]; do
  case $1 in
    --exit) status=$2; shift ;;
    --touch) printf 'made by a step\n' > "$2"; shift ;;
    --sleep)
      trap 'exit 143' TERM
      sleep "$2" &
      wait "$!"
      shift ;;
  esac
  shift
done
exit "$status"
