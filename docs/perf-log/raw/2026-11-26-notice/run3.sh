#!/bin/bash
# run3.sh: the proof set on 2a77eaa (the default policy, every LC kind, 1 and 3 BEs, the agent killed and stopped).
set -u
T=/tmp/gq; mkdir -p $T
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build-gpu/COMMIT build-gpu/COMMIT.preempt; nproc; } | tee $OUT/env.txt
[ -x $T/bin/lc_micro ] || bash tests/gpu/build.sh $T/bin >/dev/null || { echo build failed; exit 1; }
export PYTHONUNBUFFERED=1
rm -rf $T/pr1
timeout 520 python3 tests/gpu/suite.py --sets proof --bin $T/bin --build build-gpu --out $T/pr1 --duration-s 4 --max-s 500 > $OUT/pr1.log 2>&1; echo "pr1 rc $?"
cp $T/pr1/suite.json $OUT/pr1-suite.json 2>/dev/null
tar cJf $OUT/pr1-traces.txz -C $T/pr1 . 2>/dev/null
grep "^| [mrvb]" $OUT/pr1.log | grep -v "^| be alone" | cut -c1-130 | head -34
grep -A40 "^| target" $OUT/pr1.log | cut -c1-140
