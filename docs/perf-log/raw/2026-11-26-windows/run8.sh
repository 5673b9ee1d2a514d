#!/bin/bash
# run49.sh: bewin3be again, turn changes right after a window.
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
  echo "== $tag"; grep "^| [mrvb]" $OUT/$tag.log | grep -v "^| be alone" | cut -c1-200 | head -24; }
run1 bewin3be "" 420 bewin9 --repeat 2
for t in bewin9; do awk "/model GPU time/{f=1} f" $OUT/$t.log | cut -c1-120 | head -18; done
python3 - <<'PY'
import json,os
for t in ("bewin9",):
    d=json.load(open(os.environ["OUT"]+"/"+t+"-suite.json"))
    for r in d["runs"]:
        for be, lines in (r.get("window_log") or {}).items():
            print(r["scenario"], r["rep"], be, [l[:90] for l in lines if "opened" in l][-1:])
PY
grep -h "turns\|window" $T/bewin9/gpuqosctl-list.log | sort | uniq -c | sort -rn | head -8
