#!/usr/bin/env bash
# Run every benchmark and record the results, with the machine they ran on, in bench/RESULTS.md.
#   bash bench/run.sh            (after the README's setup; uses .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
out=bench/RESULTS.md
{
  echo "# Benchmark results"
  echo
  echo "Recorded by \`bash bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), \
$(lscpu | sed -n 's/^Model name: *//p' | head -n1), $($py --version), $(uname -sr)."
  echo "Shared machine: ratios are measured side by side in one run; absolute times are medians."
  for bench in core kvbytes estimates_loo estimates_speed parser sim simweb db history web size; do
    [ -f "bench/bench_$bench.py" ] || continue
    echo
    echo "## $bench"
    echo
    PYTHONPATH=. $py "bench/bench_$bench.py"
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
