#!/usr/bin/env bash
# Run every benchmark and record the results, with the machine they ran on, in bench/RESULTS.md.
#   bash bench/run.sh            always completes and exits 0: benchmarks report, they do not fail
#   bash bench/run.sh --check    the same run, then exit 1 if any benchmark missed a target or failed
# Each benchmark runs under a time limit (BENCH_TIMEOUT_S, default 1800 s); one that misses a
# target, crashes or times out is recorded as such and the others still run. Benchmarks that take
# `--check` get it (they exit 1 on a missed target); for the others only a crash or a time-out counts.
set -uo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
out=bench/RESULTS.md
check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    *) echo "usage: bash bench/run.sh [--check]" >&2; exit 2 ;;
  esac
done
limit="${BENCH_TIMEOUT_S:-1800}"
summary=()
missed=0
{
  echo "# Benchmark results"
  echo
  echo "Recorded by \`bash bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), \
$(lscpu | sed -n 's/^Model name: *//p' | head -n1), $($py --version), $(uname -sr); \
load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
  echo "Shared machine: ratios are measured side by side in one run; absolute times are medians."
  for bench in core kvbytes estimates_loo estimates_speed parser sim simweb db history web plans memory size browser; do
    script="bench/bench_$bench.py"
    [ -f "$script" ] || continue
    flags=()
    grep -q -- '"--check"' "$script" && flags+=(--check)
    echo
    echo "## $bench"
    echo
    start=$(date +%s)
    PYTHONPATH=. timeout "$limit" $py "$script" "${flags[@]}" 2>"bench/.bench_$bench.stderr"
    status=$?
    took=$(( $(date +%s) - start ))
    if [ "$status" = 1 ] && { [ ${#flags[@]} = 0 ] || grep -q '^Traceback' "bench/.bench_$bench.stderr"; }; then
      status=3  # an uncaught exception, not a missed target
    fi
    case "$status" in
      0) verdict="ran (${took} s)${flags:+; every target met}" ;;
      1) verdict="ran (${took} s); a target missed (see its table)"; missed=1 ;;
      124) verdict="TIMED OUT after ${limit} s"; missed=1 ;;
      *) verdict="FAILED (an error; its last lines are above)"; missed=1 ;;
    esac
    if [ "$status" -gt 1 ]; then
      echo
      echo "Benchmark $verdict; its last error lines:"
      echo
      echo '```'
      tail -n 5 "bench/.bench_$bench.stderr"
      echo '```'
    fi
    rm -f "bench/.bench_$bench.stderr"
    summary+=("| $bench | $verdict |")
  done
  echo
  echo "## Summary"
  echo
  echo "| benchmark | outcome |"
  echo "| --- | --- |"
  printf '%s\n' "${summary[@]}"
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
if [ "$check" = 1 ] && [ "$missed" = 1 ]; then
  exit 1
fi
exit 0
