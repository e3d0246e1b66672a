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

FlashAttention's arguments, as flash_attn_func / flash_attn_varlen_func / flash_attn_with_kvcache
take them: window_size=(L, R), softcap, alibi_slopes; packed varlen q [total_q, H, D] (k, v
[total_k, Hkv, D]) with int32 cu_seqlens_q / cu_seqlens_k [B + 1]; a paged cache k, v
[num_blocks, block_size, Hkv, D] with block_table [B, max_blocks] and seqused_k [B]. k and v may
have fewer heads than q (GQA). The outputs are then given padded, [B, H, max Sq, D].

A path ending in .h5 is written in flashcore-check's HDF5 schema (needs h5py); anything else
as a .npz (numpy only). bfloat16 has no numpy type: it is stored as its uint16 bits with a note
(dtype = "bfloat16"), which flashcore-check reads back exactly; a bfloat16 output beside inputs
of another type is stored as float32, which holds it exactly.
"""
import numpy as np

OUTPUTS = ("scores", "probs", "row_max", "row_sum", "partial_out", "partial_lse")
NOTES = ("impl", "tile_width")
LAYOUT = ("cu_seqlens_q", "cu_seqlens_k", "block_table", "seqused_k")


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


def _int32(x):
    return None if x is None else np.ascontiguousarray(_as_array(x)[0]).astype(np.int32)


def _padded(packed, cu, longest):
    """[total, H, D] rows of each sequence (offsets cu) as [B, H, longest, D], zeros past each length."""
    out = np.zeros((len(cu) - 1, packed.shape[1], longest, packed.shape[2]), dtype=packed.dtype)
    for b in range(len(cu) - 1):
        out[b, :, : cu[b + 1] - cu[b]] = packed[cu[b]: cu[b + 1]].transpose(1, 0, 2)
    return out


def _logical(q, k, v, layout):
    """The padded [B,H,S,D] tensors and per-sequence lengths of FlashAttention's layouts."""
    cu_q, cu_k, table, used = (layout[n] for n in LAYOUT)
    q_lens = kv_lens = None
    if cu_q is not None:
        q_lens = np.diff(cu_q)
        q = _padded(q, cu_q, max(1, int(q_lens.max())))
    if table is not None:
        kv_lens = used
        block = k.shape[1]
        longest = max(1, int(used.max()))
        batch, heads = table.shape[0], k.shape[2]
        k_pad = np.zeros((batch, heads, longest, k.shape[3]), dtype=k.dtype)
        v_pad = np.zeros_like(k_pad)
        for b in range(batch):
            for j in range(int(used[b])):
                k_pad[b, :, j] = k[table[b, j // block], j % block]
                v_pad[b, :, j] = v[table[b, j // block], j % block]
        k, v = k_pad, v_pad
    elif cu_k is not None:
        kv_lens = np.diff(cu_k)
        longest = max(1, int(kv_lens.max()))
        k, v = _padded(k, cu_k, longest), _padded(v, cu_k, longest)
    if (q_lens is None) != (kv_lens is None):  # one side given: the other is every sequence's full length
        if q_lens is None:
            q_lens = np.full(q.shape[0], q.shape[2])
        else:
            kv_lens = np.full(k.shape[0], k.shape[2])
    return q, k, v, q_lens, kv_lens


def capture(path, q, k, v, out=None, lse=None, attn_mask=None, scale=None, is_causal=False, window_size=None,
            softcap=None, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, block_table=None, seqused_k=None,
            **stages):
    unknown = sorted(set(stages) - set(OUTPUTS) - set(NOTES))
    if unknown:
        raise TypeError(f"capture: unknown keyword {unknown[0]!r} (outputs: {', '.join(OUTPUTS)}; notes: impl, tile_width)")
    (q, bf16), (k, _), (v, _) = _as_array(q), _as_array(k), _as_array(v)
    layout = {"cu_seqlens_q": _int32(cu_seqlens_q), "cu_seqlens_k": _int32(cu_seqlens_k),
              "block_table": _int32(block_table), "seqused_k": _int32(seqused_k)}
    if (layout["block_table"] is None) != (layout["seqused_k"] is None):
        raise ValueError("a paged cache needs both block_table and seqused_k")
    lq, lk, lv, q_lens, kv_lens = _logical(q, k, v, layout)
    if lq.ndim != 4 or lk.ndim != 4 or lv.shape != lk.shape or lk.shape[0] != lq.shape[0] or lk.shape[3] != lq.shape[3]:
        raise ValueError(f"q, k, v must be [B, H, S, D] (k, v with Hkv heads), got {q.shape}, {k.shape}, {v.shape}")
    b, h, sq, d = lq.shape
    sk = lk.shape[2]
    mask = None if attn_mask is None else _as_array(attn_mask)[0]
    slopes = None if alibi_slopes is None else _as_array(alibi_slopes)[0].astype(np.float32)
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
    features = {"window_size": window_size, "softcap": softcap, "alibi_slopes": slopes}
    if str(path).endswith(".h5"):
        cache = k.shape[:2] if layout["block_table"] is not None else None  # (num_blocks, block_size)
        _write_h5(str(path), lq, lk, lv, mask, scale, is_causal, bf16, outputs, notes, features, q_lens, kv_lens,
                  layout, cache)
    else:
        _write_npz(path, q, k, v, mask, scale, is_causal, bf16, outputs, notes, features, layout)


def _write_npz(path, q, k, v, mask, scale, is_causal, bf16, outputs, notes, features, layout):
    """FlashAttention's own form: packed or paged tensors as given, with their offsets and table."""
    arrays = {"q": q, "k": k, "v": v, "is_causal": np.bool_(is_causal)}
    if bf16:
        arrays["dtype"] = np.array("bfloat16")
    if mask is not None:
        arrays["attn_mask"] = mask
    if scale is not None:
        arrays["scale"] = np.float64(scale)
    if features["window_size"] is not None:
        arrays["window_size"] = np.array(features["window_size"], dtype=np.int32)
    if features["softcap"] is not None:
        arrays["softcap"] = np.float64(features["softcap"])
    if features["alibi_slopes"] is not None:
        arrays["alibi_slopes"] = features["alibi_slopes"]
    arrays.update({name: a for name, a in layout.items() if a is not None})
    arrays.update(outputs)
    if "impl" in notes:
        arrays["impl"] = np.array(notes["impl"])
    if "tile_width" in notes:
        arrays["tile_width"] = np.int64(notes["tile_width"])
    np.savez(path, **arrays)


def _write_h5(path, q, k, v, mask, scale, is_causal, bf16, outputs, notes, features, q_lens, kv_lens, layout, cache):
    """Our schema: the padded [B, H, S, D] tensors with per-sequence lengths and the block table."""
    import h5py

    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    window, softcap = features["window_size"], features["softcap"]
    dtype = "bf16" if bf16 else {np.dtype("float16"): "fp16", np.dtype("float32"): "fp32"}[q.dtype]
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "flashcore-check"
        f.attrs["schema_version"] = np.int64(2)
        f.attrs["kind"] = "capture" if outputs else "report"
        meta = f.create_group("meta")
        meta.attrs["shape"] = np.array([b, h, sq, sk, d], dtype=np.int64)
        meta.attrs["kv_heads"] = np.int64(hkv)
        meta.attrs["dtype"] = dtype
        meta.attrs["scale"] = float(scale if scale is not None else 1.0 / np.sqrt(d))
        meta.attrs["causal"] = "top_left" if is_causal else "none"
        meta.attrs["softcap"] = float(softcap or 0.0)
        meta.attrs["window"] = np.array(window if window is not None else (-1, -1), dtype=np.int64)
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
        if features["alibi_slopes"] is not None:
            f.create_dataset("inputs/alibi_slopes", data=features["alibi_slopes"].astype(np.float64))
        if q_lens is not None:
            f.create_dataset("inputs/q_lens", data=np.asarray(q_lens, dtype=np.int32))
            f.create_dataset("inputs/kv_lens", data=np.asarray(kv_lens, dtype=np.int32))
        if cache is not None:
            f.create_dataset("inputs/block_table", data=layout["block_table"])
            meta.attrs["num_blocks"] = np.int64(cache[0])
            meta.attrs["block_size"] = np.int64(cache[1])
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
