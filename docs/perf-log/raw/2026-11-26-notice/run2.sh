#!/bin/bash
# run2.sh: where in a take-off the BE leaves the engine (rm_probe windows, with and without the PREEMPT).
set -u
T=/tmp/gq; mkdir -p $T
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build-gpu/COMMIT build-gpu/COMMIT.preempt; nproc; } | tee $OUT/env.txt
[ -x $T/bin/lc_micro ] || bash tests/gpu/build.sh $T/bin >/dev/null || { echo build failed; exit 1; }
export PYTHONUNBUFFERED=1
rm -rf $T/wn1
timeout 420 python3 tests/gpu/suite.py --sets winnotice --bin $T/bin --build build-gpu --out $T/wn1 --duration-s 6 --max-s 400 > $OUT/wn1.log 2>&1; echo "wn1 rc $?"
cp $T/wn1/suite.json $OUT/wn1-suite.json 2>/dev/null
tar cJf $OUT/wn1-traces.txz -C $T/wn1 . 2>/dev/null
grep -rh "rm_probe: pid [0-9]* \(disable\|preempt\|enable\):" $T/wn1 2>/dev/null | tail -n 60 > $OUT/wn1-ctl.txt
grep "^| [mvb]" $OUT/wn1.log | cut -c1-150 | head -24
awk "/model GPU time/{f=1} f" $OUT/wn1.log | cut -c1-110 | head -24
wc -l $OUT/wn1-ctl.txt
