#!/bin/bash
# run1.sh: how late a window may open (beforeUs 1200/900/700/500 under afterUs "auto"); the default policy's micro rows.
set -u
T=/tmp/gq; mkdir -p $T
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build-gpu/COMMIT build-gpu/COMMIT.preempt; nproc; } | tee $OUT/env.txt
[ -x $T/bin/lc_micro ] || bash tests/gpu/build.sh $T/bin >/dev/null || { echo build failed; exit 1; }
export PYTHONUNBUFFERED=1
run1() { s=$1; only=$2; m=$3; tag=$4; shift 4
  rm -rf $T/$tag
  timeout $((m + 20)) python3 tests/gpu/suite.py --sets $s ${only:+--only "$only"} --bin $T/bin --build build-gpu --out $T/$tag "$@" --max-s $m > $OUT/$tag.log 2>&1; echo "$tag rc $?"
  cp $T/$tag/suite.json $OUT/$tag-suite.json 2>/dev/null
  tar cJf $OUT/$tag-traces.txz -C $T/$tag . 2>/dev/null; }
run1 proof '^micro (alone|gq:default [13]xfill)' 70 pm1 --duration-s 4
run1 winbefore "" 380 wb1 --duration-s 6
for t in pm1 wb1; do echo "== $t"; grep "^| [mvb]" $OUT/$t.log | cut -c1-160 | head -24; done
awk "/model GPU time/{f=1} f" $OUT/wb1.log | cut -c1-150 | head -24
grep -h "windows now\|windows on GPU" $T/wb1/agent-*.log 2>/dev/null | cut -c25-140 | sort | uniq -c | sort -rn | head -8
