#!/usr/bin/env bash
# Run on the device machine from the repo root:
#   bash bench/kernel_tuning/device.sh TOTAL_S SPEC [SPEC ...]
# SPEC = PASS or PASS:--opt=val,--opt2=val (e.g. pass1:--precompile-jobs=12).
# Resumes from traces/kernel-tuning/*.jsonl (they travel with the working tree), probes the
# environment (+ copy bandwidth) into $OUT/env.json, runs each pass with the time left, restarts a
# pass whose process lost the CUDA context (exit 3), stops at the first pass cut by the deadline.
set -u
OUT=${OUT:-out/kt}
mkdir -p "$OUT"
T0=$(date +%s)
TOTAL=$1
shift
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || echo "wheel install failed: builtin schema validator"
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1
for f in traces/kernel-tuning/*.jsonl traces/kernel-tuning/run.log traces/kernel-tuning/env.json; do
  [ -f "$f" ] && cp "$f" "$OUT/"
done
python3 -m bench.kernel_tuning.run --env-only --copy-bw --out "$OUT" | cut -c1-600 || echo "env probe failed"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
  --format=csv 2>&1 | tee -a "$OUT/run.log"
rc=0
for spec in "$@"; do
  pass=${spec%%:*}
  extra=""
  [ "$spec" != "$pass" ] && extra=$(echo "${spec#*:}" | tr ',' ' ')
  for try in 1 2 3; do
    left=$(( TOTAL - ($(date +%s) - T0) ))
    if [ "$left" -lt 25 ]; then echo "no time left for $pass"; rc=2; break; fi
    python3 -m bench.kernel_tuning.run --pass "$pass" --out "$OUT" --limit-s "$left" $extra
    rc=$?
    [ $rc -eq 3 ] && { echo "restart $pass after lost GPU"; continue; }
    break
  done
  [ $rc -eq 2 ] && break
done
python3 -m bench.kernel_tuning.report "$OUT" 2>&1 | tail -60 || true
echo "device.sh done rc=$rc after $(( $(date +%s) - T0 ))s"
