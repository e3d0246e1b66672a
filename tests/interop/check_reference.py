#!/usr/bin/env python3
"""Independent FP64 check of `flashcore-check reference`: recomputes
softmax(scale * q k^T + mask) v with NumPy from the report and compares it, and the scores and
probabilities, with what the tool wrote (read with h5py). Relative error <= 1e-12 of each
tensor's largest magnitude; -inf scores must match exactly; a fully masked row is 0.

  check_reference.py REPORT.npz REF.h5
"""
import sys

import h5py
import numpy as np


def as_float64(x, bf16):
    if bf16:
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def reference(report):
    z = np.load(report)
    bf16 = "dtype" in z.files and str(z["dtype"]) == "bfloat16"
    q, k, v = (as_float64(z[n], bf16) for n in ("q", "k", "v"))
    d = q.shape[-1]
    scale = float(z["scale"]) if "scale" in z.files else 1.0 / np.sqrt(d)
    s = scale * np.einsum("bhqd,bhkd->bhqk", q, k)
    sq, sk = s.shape[-2:]
    if "is_causal" in z.files and bool(z["is_causal"]):
        s = np.where(np.tril(np.ones((sq, sk), dtype=bool)), s, -np.inf)
    if "attn_mask" in z.files:
        m = z["attn_mask"]
        s = np.where(m, s, -np.inf) if m.dtype == bool else s + m.astype(np.float32).astype(np.float64)
    s = np.broadcast_to(s, q.shape[:2] + (sq, sk))
    top = s.max(axis=-1, keepdims=True)
    masked = np.isneginf(top)
    e = np.where(masked, 0.0, np.exp(s - np.where(masked, 0.0, top)))
    total = e.sum(axis=-1, keepdims=True)
    p = np.where(masked, 0.0, e / np.where(masked, 1.0, total))
    return s, p, p @ v


def close(name, got, want):
    finite = np.isfinite(want)
    if not np.array_equal(np.isneginf(got), np.isneginf(want)) or not np.all(np.isfinite(got[finite])):
        return f"{name}: infinities differ"
    scale = max(1.0, np.abs(want[finite]).max(initial=0.0))
    err = np.abs(got[finite] - want[finite]).max(initial=0.0) / scale
    return None if err <= 1e-12 else f"{name}: relative error {err:.3g} > 1e-12"


def main(report, ref_path):
    s, p, o = reference(report)
    with h5py.File(ref_path, "r") as f:
        problems = [close("scores", f["/reference/full/scores"][...], s),
                    close("probs", f["/reference/full/probs"][...], p),
                    close("output", f["/reference/full/output"][...], o)]
        if f["/reference/full/output"].dtype != np.float64:
            problems.append("output is not float64")
    problems = [x for x in problems if x]
    for x in problems:
        print(f"{ref_path}: {x}")
    if not problems:
        print(f"{report}: scores, probs and output match NumPy FP64 to 1e-12")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
