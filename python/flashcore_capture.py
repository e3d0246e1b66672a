"""Capture what an attention kernel got and produced, for `flashcore-check check` and `triage`.

    import sys; sys.path.insert(0, "path/to/flashcore-check/python")
    from flashcore_capture import capture

    out = my_attention(q, k, v, is_causal=True)
    capture("case.npz", q, k, v, out, is_causal=True, impl="my-attention")

    $ flashcore-check check case.npz --arithmetic fp16-fp32acc

q, k, v are [B, H, S, D] tensors (torch or numpy) in float16, bfloat16 or float32, as given to
torch.nn.functional.scaled_dot_product_attention; attn_mask is boolean (True = attend) or
additive float, any shape that broadcasts to [B, H, Sq, Sk]; scale defaults to 1/sqrt(D); is_causal
is top-left (PyTorch's). out is the kernel's [B, H, Sq, D] output (None: a bug report with inputs
only, what `triage` reads). Optional, each checked when given:

    lse          [B, H, Sq] natural-log log-sum-exp of the scaled scores ([B, H, Sq, 1] and a
                 row dimension padded past Sq, as some kernels return it, are cut to [B, H, Sq])
    scores       [B, H, Sq, Sk] scale * q k^T + mask (-inf where masked)
    probs        [B, H, Sq, Sk] softmax rows (0 in a row with no key)
    row_max      [B, H, Sq] max of each row of scores
    row_sum      [B, H, Sq] sum of exp(score - row_max)
    partial_out  [B, H, T, Sq, D] each split's normalized output (split-KV), with
    partial_lse  [B, H, T, Sq] each split's lse, and
    tile_width   keys per tile: split t covers tiles [t*n, (t+1)*n) of ceil(Sk/tile_width),
                 n = ceil(tiles/T), as FlashAttention's split-KV cuts them
    impl         a name for the kernel, shown in the report

A path ending in .h5 is written in flashcore-check's HDF5 schema (needs h5py); anything else
as a .npz (numpy only). bfloat16 has no numpy type: it is stored as its uint16 bits with a note
(dtype = "bfloat16"), which flashcore-check reads back exactly; a bfloat16 output beside inputs
of another type is stored as float32, which holds it exactly.
"""
import numpy as np

OUTPUTS = ("scores", "probs", "row_max", "row_sum", "partial_out", "partial_lse")
NOTES = ("impl", "tile_width")


def _as_array(t):
    """(numpy array, is_bf16) of a torch tensor or array-like; bfloat16 as its uint16 bits."""
    if hasattr(t, "detach"):  # torch.Tensor
        t = t.detach().cpu().contiguous()
        if str(t.dtype) == "torch.bfloat16":
            import torch
            return t.view(torch.int16).numpy().view(np.uint16), True
        return t.numpy(), False
    return np.ascontiguousarray(t), False


def _bf16_bits_to_float32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _output(name, t, inputs_bf16, shape):
    a, bf16 = _as_array(t)
    if bf16 and not inputs_bf16:
        a, bf16 = _bf16_bits_to_float32(a), False
    if not bf16 and a.dtype not in (np.float16, np.float32):
        a = a.astype(np.float32)
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {tuple(shape)}")
    return a


def _lse(t, inputs_bf16, b, h, sq):
    a = _output("lse", t, inputs_bf16, None)
    if a.ndim == 4 and a.shape[3] == 1:
        a = a[..., 0]
    if a.ndim != 3 or a.shape[:2] != (b, h) or a.shape[2] < sq:
        raise ValueError(f"lse has shape {a.shape}, expected ({b}, {h}, {sq})")
    return np.ascontiguousarray(a[:, :, :sq])


def capture(path, q, k, v, out=None, lse=None, attn_mask=None, scale=None, is_causal=False, **stages):
    unknown = sorted(set(stages) - set(OUTPUTS) - set(NOTES))
    if unknown:
        raise TypeError(f"capture: unknown keyword {unknown[0]!r} (outputs: {', '.join(OUTPUTS)}; notes: impl, tile_width)")
    (q, bf16), (k, _), (v, _) = _as_array(q), _as_array(k), _as_array(v)
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape:
        raise ValueError(f"q, k, v must be [B, H, S, D], got {q.shape}, {k.shape}, {v.shape}")
    b, h, sq, d = q.shape
    sk = k.shape[2]
    mask = None if attn_mask is None else _as_array(attn_mask)[0]
    outputs = {}
    if out is not None:
        outputs["out"] = _output("out", out, bf16, (b, h, sq, d))
    if lse is not None:
        outputs["lse"] = _lse(lse, bf16, b, h, sq)
    expected = {"scores": (b, h, sq, sk), "probs": (b, h, sq, sk), "row_max": (b, h, sq), "row_sum": (b, h, sq)}
    for name in OUTPUTS:
        if stages.get(name) is not None:
            outputs[name] = _output(name, stages[name], bf16, expected.get(name))
    notes = {}
    if stages.get("impl"):
        notes["impl"] = str(stages["impl"])
    if stages.get("tile_width") is not None:
        notes["tile_width"] = int(stages["tile_width"])
    if str(path).endswith(".h5"):
        _write_h5(str(path), q, k, v, mask, scale, is_causal, bf16, outputs, notes)
    else:
        _write_npz(path, q, k, v, mask, scale, is_causal, bf16, outputs, notes)


def _write_npz(path, q, k, v, mask, scale, is_causal, bf16, outputs, notes):
    arrays = {"q": q, "k": k, "v": v, "is_causal": np.bool_(is_causal)}
    if bf16:
        arrays["dtype"] = np.array("bfloat16")
    if mask is not None:
        arrays["attn_mask"] = mask
    if scale is not None:
        arrays["scale"] = np.float64(scale)
    arrays.update(outputs)
    if "impl" in notes:
        arrays["impl"] = np.array(notes["impl"])
    if "tile_width" in notes:
        arrays["tile_width"] = np.int64(notes["tile_width"])
    np.savez(path, **arrays)


def _write_h5(path, q, k, v, mask, scale, is_causal, bf16, outputs, notes):
    import h5py

    b, h, sq, d = q.shape
    sk = k.shape[2]
    dtype = "bf16" if bf16 else {np.dtype("float16"): "fp16", np.dtype("float32"): "fp32"}[q.dtype]
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "flashcore-check"
        f.attrs["schema_version"] = np.int64(1)
        f.attrs["kind"] = "capture" if outputs else "report"
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
        if outputs:
            group = f.create_group("outputs")
            for name, x in outputs.items():
                ds = group.create_dataset(name, data=x)
                if x.dtype == np.uint16:
                    ds.attrs["dtype"] = "bfloat16"
            if "impl" in notes:
                group.attrs["impl"] = notes["impl"]
            if "tile_width" in notes:
                group.attrs["tile_width"] = np.int64(notes["tile_width"])
