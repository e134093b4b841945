#!/bin/sh
# Final evaluation: latency of every new ONNX (with the 5 reference zoo models), the
# validation-only selection, then the project's rule on the TEST set for
# (A) every trained candidate and (B) the validation-selected set; predictions TSV.
cd "$(dirname "$0")"
PY=../../../.deps/train-venv/bin/python
ALL=$(ls out/*.json | grep -v -e latency -e selected | xargs -n1 basename | sed 's/\.json$//' | tr '\n' ' ')
nice -n 19 $PY latency.py $ALL
nice -n 19 $PY select_val.py $ALL
SEL=$($PY -c "import json; print(' '.join(json.load(open('out/selected.json'))))")
echo "== (A) test rule, all candidates"; nice -n 19 $PY rule.py $ALL
echo "== (B) test rule, validation-selected: $SEL"; nice -n 19 $PY rule.py $SEL
nice -n 19 $PY make_tsv.py $ALL
