#!/bin/bash
# run55.sh: the final build (a shorter period cuts the window at once): winauto (1 BE, the models), winauto3.
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
  grep -h "windows on GPU\|windows end\|windows now\|went away" $T/$tag/agent-winauto.log 2>/dev/null | cut -c25-150 | head -30
  grep -h "spanUs" $T/$tag/gpuqosctl-list.log 2>/dev/null | grep -o '"phase":{[^}]*}' | sort | uniq -c | head -4; }
run1 winauto "vit|bert" 300 wa7
run1 winauto3 "" 250 wa8
for t in wa7 wa8; do awk "/model GPU time/{f=1} f" $OUT/$t.log | cut -c1-140 | head -14; grep -A6 "longest stall" $OUT/$t.log | head -6; done
