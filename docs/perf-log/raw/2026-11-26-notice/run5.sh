#!/bin/bash
# run5.sh: WINDOW_STATE on a GPU: BERT-base beside a be_fill under winbert and winauto; what gpuqosctl list says the BE holds.
set -u
T=/tmp/gq; mkdir -p $T
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build-gpu/COMMIT build-gpu/COMMIT.preempt; nproc; } | tee $OUT/env.txt
[ -x $T/bin/lc_micro ] || bash tests/gpu/build.sh $T/bin >/dev/null || { echo build failed; exit 1; }
export PYTHONUNBUFFERED=1
rm -rf $T/ws1
timeout 300 python3 tests/gpu/suite.py --sets winauto --only '^(be alone fill|bert_base_graph (alone pinned|gq:(winbert|winauto) 1xfill pinned))$' --bin $T/bin --build build-gpu --out $T/ws1 --duration-s 6 --repeat 2 --max-s 280 > $OUT/ws1.log 2>&1; echo "ws1 rc $?"
cp $T/ws1/suite.json $OUT/ws1-suite.json 2>/dev/null
tar cJf $OUT/ws1-traces.txz -C $T/ws1 . 2>/dev/null
grep "^| [b]" $OUT/ws1.log | cut -c1-130 | head -8
grep "window mid-window" $OUT/ws1.log | cut -c1-300
grep -h "WINDOW_STATE\|refused\|windows on GPU\|windows now" $T/ws1/agent-*.log | cut -c25-160 | sort | uniq -c | head -10
