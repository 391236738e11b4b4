#!/usr/bin/env bash
# Run on the device machine from the repo root:
#   bash bench/kernel_tuning/device_e2e.sh TOTAL_S STAGE [STAGE ...]
# Stages (in the order given; each gets the time left):
#   smoke     e2e on Llama-3.2-1B, batch 1, context 512, 20 numerics steps, one fresh compile of
#             each torch.compile configuration; into $OUT/smoke
#   rerecord  the 64 RMSNorm / SwiGLU / softmax workloads re-recorded twice (rerecord1, rerecord2:
#             torch.compile's kernel among the candidates, P2 deciding); into $OUT/rerecord
#   e2e       the full e2e (3 models x 1x512, 1x4096, 8x512; $KT_E2E_ARGS are passed on, e.g.
#             --plan "Qwen3-4B=1x512,1x4096,8x512;Llama-3.2-1B=4x512/0" --file e2e_b.json); into $OUT/e2e
#   verify    the specialist of $KT_CARRY/gen (pass1/pass2 + rerecord1/rerecord2 recordings)
#             re-measured against the reference agent, the vendor path and torch.compile's kernel;
#             into $OUT/verify
# $KT_CARRY (default .carry) holds whl/*.whl (wasmtime for auto_runtime), gen.wasm (the compiled
# specialist) and gen/ (the recordings it was compiled from). Everything under $OUT is packed
# into $OUT/kt.tgz at the end (the device returns at most 8 files).
set -u
OUT=${OUT:-out/kt}
mkdir -p "$OUT"
T0=$(date +%s)
TOTAL=$1
shift
CARRY=${KT_CARRY:-.carry}
if ls "$CARRY"/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$CARRY"/whl/*.whl \
    || echo "wheel install failed"
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/runtime PYTHONUNBUFFERED=1
# Triton's binary cache is shared by every compile; Inductor's cache is made fresh per compile (e2e.fresh_inductor)
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/kt-triton-cache}
left() { echo $(( TOTAL - ($(date +%s) - T0) )); }
smi() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
    --format=csv 2>&1 | tee -a "$OUT/device.log"
}
smi
ART=""
[ -f "$CARRY/gen.wasm" ] && ART="--artifact $CARRY/gen.wasm"
rc=0
for stage in "$@"; do
  l=$(left)
  echo "[device] stage $stage with ${l}s left" | tee -a "$OUT/device.log"
  if [ "$l" -lt 40 ]; then echo "[device] no time left for $stage" | tee -a "$OUT/device.log"; rc=2; break; fi
  case $stage in
    smoke)
      s=${KT_SMOKE_S:-200}
      [ "$s" -gt "$l" ] && s=$l
      timeout "$s" python3 -m bench.kernel_tuning.e2e $ART --out "$OUT/smoke" --plan Llama-3.2-1B=1x512/1 \
        --steps 20 --rounds 3 --file e2e_smoke.json --limit-s $(( s - 20 )) || rc=$?
      ;;
    rerecord)
      mkdir -p "$OUT/rerecord"
      python3 -m bench.kernel_tuning.run --env-only --copy-bw --out "$OUT/rerecord" | cut -c1-300
      for p in rerecord1 rerecord2; do
        for try in 1 2 3; do
          l=$(left)
          [ "$l" -lt 30 ] && { echo "[device] no time left for $p"; rc=2; break; }
          python3 -m bench.kernel_tuning.run --pass $p --out "$OUT/rerecord" --limit-s $(( l - 15 )) --precompile-jobs 12
          r=$?
          [ $r -eq 3 ] && { echo "[device] restart $p after lost GPU"; continue; }
          [ $r -ne 0 ] && rc=$r
          break
        done
      done
      ;;
    e2e)
      s=${KT_E2E_S:-$l}
      [ "$s" -gt "$l" ] && s=$l
      # shellcheck disable=SC2086
      timeout $(( s - 5 )) python3 -m bench.kernel_tuning.e2e $ART --out "$OUT/e2e" --limit-s $(( s - 30 )) \
        ${KT_E2E_ARGS:-} || rc=$?
      ;;
    verify)
      python3 -m bench.kernel_tuning.verify --traces "$CARRY/gen" --out "$OUT/verify" --file verify2.jsonl \
        --generation 2 --limit-s $(( l - 10 )) --precompile-jobs 12 --copy-bw || rc=$?
      ;;
    *) echo "[device] unknown stage $stage"; rc=1 ;;
  esac
  smi
done
echo "[device] done rc=$rc after $(( $(date +%s) - T0 ))s" | tee -a "$OUT/device.log"
(cd "$OUT" && tar czf kt.tgz --exclude kt.tgz --exclude device.log . 2>/dev/null \
  && find . -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +)
exit $rc
