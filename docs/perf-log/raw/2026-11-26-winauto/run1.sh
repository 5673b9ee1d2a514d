#!/bin/bash
# run51.sh: windows.afterUs "auto" against the hand-set windows and the default policy.
set -u
T=/tmp/gq; mkdir -p $T
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build-gpu/COMMIT build-gpu/COMMIT.preempt; nproc; } | tee $OUT/env.txt
[ -x $T/bin/lc_micro ] || bash tests/gpu/build.sh $T/bin >/dev/null || { echo build failed; exit 1; }
export PYTHONUNBUFFERED=1
run1() { s=$1; only=$2; m=$3; tag=$4; shift 4
  rm -rf $T/$tag
  timeout $((m + 20)) python3 tests/gpu/suite.py --sets $s ${only:+--only "$only"} --bin $T/bin --build build-gpu --out $T/$tag --duration-s 6 --max-s $m "$@" > $OUT/$tag.log 2>&1; echo "$tag rc $?"
  cp $T/$tag/suite.json $OUT/$tag-suite.json 2>/dev/null
  tar cJf $OUT/$tag-traces.txz -C $T/$tag . 2>/dev/null
  echo "== $tag"; grep "^| [mvb]" $OUT/$tag.log | grep -v "^| be alone" | cut -c1-150 | head -20
  grep -h "windows on GPU\|windows end" $T/$tag/agent-winauto.log 2>/dev/null | cut -c1-160 | sort | uniq -c | sort -rn | head -8
  grep -o "[0-9]* spans measured, the latest 95th percentile [0-9]* us" $OUT/$tag.log | head -12; }
run1 winauto "" 330 wa1
run1 winauto "vit|bert" 200 wa2
for t in wa1 wa2; do awk "/model GPU time/{f=1} f" $OUT/$t.log | cut -c1-140 | head -16; done
