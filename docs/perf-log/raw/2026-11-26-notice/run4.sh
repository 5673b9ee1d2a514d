#!/bin/bash
# run4.sh: the eager LC beside one training BE, twice, 8 s: the launch-bound rule against driver defaults.
set -u
T=/tmp/gq; mkdir -p $T
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build-gpu/COMMIT build-gpu/COMMIT.preempt; nproc; } | tee $OUT/env.txt
[ -x $T/bin/lc_micro ] || bash tests/gpu/build.sh $T/bin >/dev/null || { echo build failed; exit 1; }
export PYTHONUNBUFFERED=1
rm -rf $T/eg1
timeout 400 python3 tests/gpu/suite.py --sets proof --only '^(be alone train|resnet50_eager (alone|gq:default 1xtrain|defaults 1xtrain|gq:norule 1xtrain))$' --repeat 2 --bin $T/bin --build build-gpu --out $T/eg1 --duration-s 8 --max-s 380 > $OUT/eg1.log 2>&1; echo "eg1 rc $?"
cp $T/eg1/suite.json $OUT/eg1-suite.json 2>/dev/null
tar cJf $OUT/eg1-traces.txz -C $T/eg1 . 2>/dev/null
grep "^| [rb]" $OUT/eg1.log | cut -c1-130 | head -14
grep "launches mid-window" $OUT/eg1.log | cut -c1-200
