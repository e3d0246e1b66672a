#!/usr/bin/env python3
"""Extracts the operands and result of one cuBLASLt P~.V page from a cublaslt-paged snapshot.

    extract_pv_tail.py SNAPSHOT.h5 PAGE FIRST_KEY OUT.npz

h100_pv_tail.npz came from the H100 run of
    flashcore-check --trace --impl cublaslt-paged --shape 1,2,125,402,64 --mask bias \
        --dist tiny --seed 171 --snapshot paged171.h5
(page 3: keys 384..401, 18 of them; cuBLASLt algo id 23 tile 11 stages 13, no split-K):
p = softmax[PAGE] p~ (fp16), v = the page's V rows (fp16), acc = rescale[PAGE] (fp32, the
C matrix, beta = 1), out = pv[PAGE] (fp32, D).
"""
import sys

import h5py
import numpy as np


def main(snapshot, page, first_key, out):
    with h5py.File(snapshot, "r") as f:
        stages = f["stages"]
        p = stages[f"softmax[{page}]/data"][0]
        n = p.shape[-1]
        np.savez(out, p=p, v=f["inputs/v"][0, :, first_key:first_key + n, :],
                 acc=stages[f"rescale[{page}]/data"][0], out=stages[f"pv[{page}]/data"][0])


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
