#!/bin/sh
# Rebuilds every candidate (fixed seeds; trained on the first 50k training images, the last
# 10k are the validation split), then final.sh (latency, validation selection, test rule, TSV).
# About 45 min on a busy 2-core machine.
cd "$(dirname "$0")"
PY=../../../.deps/train-venv/bin/python
nice -n 19 $PY train.py cs_16_32 cs_8_16 cs5_16_32 p14_32 mlp_tanh cs_24_48 dil_16_32 w1_16
nice -n 19 $PY train.py cs_32_64 cs3_16_32_64 pool_16_32 p14_32_64 w1_32k3 dw_s cs_16_32_64s res_t cs_16_32_fc pool_16_32_fc
nice -n 19 $PY oof.py cs_16_32 4            # out-of-fold errors for the boosted member
nice -n 19 $PY train.py cs_32_64_seed cs_32_64_bst cs_32_64_er cs_32_64_long
nice -n 19 $PY ncl.py ncl_a
nice -n 19 $PY train.py res_s cs_32_64_128 dw_m p14_48_96 cs5_32_64
nice -n 19 $PY ncl.py ncl_b
./final.sh
