#!/usr/bin/env bash
# The wheel-install step of CI (`make test-wheels`): build the wheels of the three distributions
# from clean copies of their sources (.ci/wheels.py, the build backend each pyproject.toml names,
# from PyPI), install them non-editable into a fresh virtual environment (dependencies from PyPI),
# and run, from outside the checkout so that only the installed code can be imported:
#   auto --help; every bench family recorded against the simulator and censused
#   (.ci/families_smoke.py); `auto census` on one of those stores; the kernel-tuning family
#   replayed from its recordings (`auto bench run kernel-tuning --replay traces/kernel-tuning`).
# Prints how long each part took (s). PY names the interpreter (default python3).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH
t0=$(date +%s)
"$PY" "$repo/.ci/wheels.py" "$tmp/wheels" > "$tmp/wheels.txt"
t1=$(date +%s)
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip > "$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
"$tmp/venv/bin/python" -m pip install -q "$tmp"/wheels/*.whl > "$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
t2=$(date +%s)
cd "$tmp"
bin="$tmp/venv/bin"
"$bin/auto" --help > /dev/null
"$bin/auto" bench --help > /dev/null
"$bin/python" "$repo/.ci/families_smoke.py" "$tmp/families"
"$bin/auto" census --store "$tmp/families/triage.sqlite" --json > /dev/null
"$bin/auto" bench run kernel-tuning --replay "$repo/traces/kernel-tuning" --out "$tmp/kernel-tuning" > /dev/null 2> "$tmp/kt.log" \
  || { cat "$tmp/kt.log"; exit 1; }
t3=$(date +%s)
echo "wheel install: built $(wc -l < "$tmp/wheels.txt") wheels in $((t1 - t0)) s, installed in $((t2 - t1)) s, commands ran in $((t3 - t2)) s ($((t3 - t0)) s in all)" >&2
