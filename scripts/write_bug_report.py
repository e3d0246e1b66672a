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
exactly. Then:

    flashcore-check triage report.npz --minimize minimal.h5

`python3 write_bug_report.py --demo DIR` writes a small demo report (numpy only) in both forms.
"""
import sys

import numpy as np


def _as_array(t):
    """numpy array of a torch tensor or array; bfloat16 as uint16 bits. Returns (array, is_bf16)."""
    if hasattr(t, "detach"):  # torch.Tensor
        t = t.detach().cpu().contiguous()
        if str(t.dtype) == "torch.bfloat16":
            import torch
            return t.view(torch.int16).numpy().view(np.uint16), True
        return t.numpy(), False
    return np.ascontiguousarray(t), False


def save_report(path, q, k, v, attn_mask=None, scale=None, is_causal=False):
    (q, bf16), (k, _), (v, _) = _as_array(q), _as_array(k), _as_array(v)
    mask = None if attn_mask is None else _as_array(attn_mask)[0]
    if path.endswith(".h5"):
        _save_h5(path, q, k, v, mask, scale, is_causal, bf16)
    else:
        arrays = {"q": q, "k": k, "v": v, "is_causal": np.bool_(is_causal)}
        if bf16:
            arrays["dtype"] = np.array("bfloat16")
        if mask is not None:
            arrays["attn_mask"] = mask
        if scale is not None:
            arrays["scale"] = np.float64(scale)
        np.savez(path, **arrays)


def _save_h5(path, q, k, v, mask, scale, is_causal, bf16):
    import h5py

    b, h, sq, d = q.shape
    sk = k.shape[2]
    dtype = "bf16" if bf16 else {np.dtype("float16"): "fp16", np.dtype("float32"): "fp32"}[q.dtype]
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "flashcore-check"
        f.attrs["schema_version"] = np.int64(2)
        f.attrs["kind"] = "report"
        meta = f.create_group("meta")
        meta.attrs["shape"] = np.array([b, h, sq, sk, d], dtype=np.int64)
        meta.attrs["dtype"] = dtype
        meta.attrs["scale"] = float(scale if scale is not None else 1.0 / np.sqrt(d))
        meta.attrs["causal"] = "top_left" if is_causal else "none"
        meta.attrs["source"] = path
        meta.attrs["seed"] = np.int64(-1)
        for name, x in (("q", q), ("k", k), ("v", v)):
            ds = f.create_dataset("inputs/" + name, data=x)
            if bf16:
                ds.attrs["dtype"] = "bfloat16"
        if mask is not None:
            mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
            if mask.dtype == np.bool_:
                f.create_dataset("inputs/mask", data=mask.astype(np.uint8)).attrs["dtype"] = "bool"
            else:
                f.create_dataset("inputs/mask", data=mask.astype(np.float32))


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
