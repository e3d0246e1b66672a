#!/usr/bin/env python3
"""Write an attention bug report that `flashcore-check triage` (and `reference`) reads.

From PyTorch, where the NaN showed up:

    from write_bug_report import save_report
    save_report("report.npz", q, k, v, attn_mask=mask, scale=None, is_causal=False)
    save_report("report.h5", q, k, v, attn_mask=mask)      # the same, in our HDF5 schema

q, k, v are [B, H, S, D] tensors (torch or numpy) in float16, bfloat16 or float32, as given
to torch.nn.functional.scaled_dot_product_attention; attn_mask is boolean (True = attend)
or additive float, any shape that broadcasts to [B, H, Sq, Sk]. bfloat16 has no numpy type:
it is saved as its uint16 bits with a note (dtype = "bfloat16"), which the tool reads back
exactly. The output the user saw can go in too (out=, lse=; python/flashcore_capture.py
writes both forms). Then:

    flashcore-check triage report.npz --minimize minimal.h5

`python3 write_bug_report.py --demo DIR` writes a small demo report (numpy only) in both forms.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from flashcore_capture import capture  # noqa: E402  (the one writer of reports and captures)


def save_report(path, q, k, v, attn_mask=None, scale=None, is_causal=False, out=None, **captured):
    """A report of the inputs; with out (and lse, intermediates: see flashcore_capture), what the
    kernel produced too, which `triage` judges beside the built-in implementations."""
    capture(path, q, k, v, out, attn_mask=attn_mask, scale=scale, is_causal=is_causal, **captured)


def _demo(directory):
    rng = np.random.RandomState(1)
    q, k, v = (rng.standard_normal((1, 2, 48, 64)).astype(np.float16) for _ in range(3))
    mask = np.ones((48, 48), dtype=bool)
    mask[7, :] = False  # a query row with no key: the classic NaN
    for ext in ("npz", "h5"):
        save_report(f"{directory}/demo.{ext}", q, k, v, attn_mask=mask)
        print(f"{directory}/demo.{ext}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--demo":
        _demo(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
