#!/usr/bin/env python3
"""Keeps batches [0, B) of a `check` capture (python/flashcore_capture.py's .npz), compressed:
rows of attention are independent, so a batch kept is the kernel's own output for it.

    trim_capture.py CAPTURE.npz B OUT.npz

cudnn_masked_rows.npz came from the H100 run (torch 2.11.0+cu130, cuDNN 9.19.0) of
    scripts/check_torch_sdpa.py --backends cudnn --out /tmp/sdpa-cudnn --keep
case 113x203-d64-mask-fp16 (B2 H2, a padded boolean mask whose rows 0, 56 and 112 of batch 0
attend no key), batch 0 kept.
"""
import sys

import numpy as np


def main(capture, batches, out):
    z = np.load(capture)
    kept = {}
    for name in z.files:
        a = z[name]
        kept[name] = a[:batches] if a.ndim >= 1 and name not in ("cu_seqlens_q", "cu_seqlens_k") else a
    np.savez_compressed(out, **kept)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
