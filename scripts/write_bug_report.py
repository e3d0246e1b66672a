#!/usr/bin/env python3
"""Write an attention bug report that `flashcore-check triage` (and `reference`) reads.

From PyTorch, where the NaN showed up:

    from write_bug_report import save_report
    save_report("report.npz", q, k, v, attn_mask=mask, scale=None, is_causal=False)
    save_report("report.h5", q, k, v, attn_mask=mask)      # the same, in our HDF5 schema

q, k, v are [B, H, S, D] tensors (torch or numpy) in float16, bfloat16 or float32, as given
to torch.nn.functional.scaled_dot_product_attention; k and v may have fewer heads than q
(GQA, as enable_gqa: query head h reads K/V head h // (H // Hkv)). attn_mask is boolean
(True = attend) or additive float (Hugging Face's finfo.min masks too), any shape that
broadcasts to [B, H, Sq, Sk]. bfloat16 has no numpy type: it is saved as its uint16 bits
with a note (dtype = "bfloat16"), which the tool reads back exactly.

FlashAttention's arguments, as flash_attn_func / flash_attn_varlen_func / flash_attn_with_kvcache
take them:

    save_report("report.npz", q, k, v, window_size=(128, 0), softcap=30.0, alibi_slopes=slopes)
    # varlen: q [total_q, H, D], k, v [total_k, Hkv, D] packed, with int32 offsets [B + 1]
    save_report("report.npz", q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, is_causal=True)
    # paged KV: k, v [num_blocks, block_size, Hkv, D], block_table [B, max_blocks], seqused_k [B]
    save_report("report.npz", q, k_cache, v_cache, block_table=table, seqused_k=lengths)

Then:

    flashcore-check triage report.npz --minimize minimal.h5

`python3 write_bug_report.py --demo DIR` writes a small demo report (numpy only) in both
forms, and `--demo-features DIR` one with GQA, a sliding window, softcap, ALiBi, packed
varlen sequences and a paged KV cache.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from flashcore_capture import _as_array  # noqa: E402  (torch or numpy to numpy, bfloat16 as its bits)


def _int32(x):
    return None if x is None else np.ascontiguousarray(_as_array(x)[0]).astype(np.int32)


def save_report(path, q, k, v, attn_mask=None, scale=None, is_causal=False, window_size=None, softcap=None,
                alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, block_table=None, seqused_k=None):
    (q, bf16), (k, _), (v, _) = _as_array(q), _as_array(k), _as_array(v)
    mask = None if attn_mask is None else _as_array(attn_mask)[0]
    slopes = None if alibi_slopes is None else _as_array(alibi_slopes)[0].astype(np.float32)
    layout = {"cu_seqlens_q": _int32(cu_seqlens_q), "cu_seqlens_k": _int32(cu_seqlens_k),
              "block_table": _int32(block_table), "seqused_k": _int32(seqused_k)}
    if path.endswith(".h5"):
        cache = k.shape[:2] if layout["block_table"] is not None else None  # (num_blocks, block_size)
        _save_h5(path, q, k, v, mask, scale, is_causal, bf16, window_size, softcap, slopes, layout, cache)
        return
    arrays = {"q": q, "k": k, "v": v, "is_causal": np.bool_(is_causal)}
    if bf16:
        arrays["dtype"] = np.array("bfloat16")
    if mask is not None:
        arrays["attn_mask"] = mask
    if scale is not None:
        arrays["scale"] = np.float64(scale)
    if window_size is not None:
        arrays["window_size"] = np.array(window_size, dtype=np.int32)
    if softcap is not None:
        arrays["softcap"] = np.float64(softcap)
    if slopes is not None:
        arrays["alibi_slopes"] = slopes
    arrays.update({name: a for name, a in layout.items() if a is not None})
    np.savez(path, **arrays)


def _padded(packed, cu, longest):
    """[total, H, D] rows of each sequence (offsets cu) as [B, H, longest, D], zeros past each length."""
    out = np.zeros((len(cu) - 1, packed.shape[1], longest, packed.shape[2]), dtype=packed.dtype)
    for b in range(len(cu) - 1):
        out[b, :, : cu[b + 1] - cu[b]] = packed[cu[b]: cu[b + 1]].transpose(1, 0, 2)
    return out


def _logical(q, k, v, layout):
    """The padded [B,H,S,D] tensors and per-sequence lengths of FlashAttention's layouts."""
    cu_q, cu_k, table, used = (layout[n] for n in ("cu_seqlens_q", "cu_seqlens_k", "block_table", "seqused_k"))
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


def _save_h5(path, q, k, v, mask, scale, is_causal, bf16, window_size, softcap, slopes, layout, cache):
    import h5py

    q, k, v, q_lens, kv_lens = _logical(q, k, v, layout)
    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    dtype = "bf16" if bf16 else {np.dtype("float16"): "fp16", np.dtype("float32"): "fp32"}[q.dtype]
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "flashcore-check"
        f.attrs["schema_version"] = np.int64(2)
        f.attrs["kind"] = "report"
        meta = f.create_group("meta")
        meta.attrs["shape"] = np.array([b, h, sq, sk, d], dtype=np.int64)
        meta.attrs["kv_heads"] = np.int64(hkv)
        meta.attrs["dtype"] = dtype
        meta.attrs["scale"] = float(scale if scale is not None else 1.0 / np.sqrt(d))
        meta.attrs["causal"] = "top_left" if is_causal else "none"
        meta.attrs["softcap"] = float(softcap or 0.0)
        meta.attrs["window"] = np.array(window_size if window_size is not None else (-1, -1), dtype=np.int64)
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
        if slopes is not None:
            f.create_dataset("inputs/alibi_slopes", data=slopes.astype(np.float64))
        if q_lens is not None:
            f.create_dataset("inputs/q_lens", data=np.asarray(q_lens, dtype=np.int32))
            f.create_dataset("inputs/kv_lens", data=np.asarray(kv_lens, dtype=np.int32))
        if cache is not None:
            f.create_dataset("inputs/block_table", data=layout["block_table"])
            meta.attrs["num_blocks"] = np.int64(cache[0])
            meta.attrs["block_size"] = np.int64(cache[1])


def _demo(directory):
    rng = np.random.RandomState(1)
    q, k, v = (rng.standard_normal((1, 2, 48, 64)).astype(np.float16) for _ in range(3))
    mask = np.ones((48, 48), dtype=bool)
    mask[7, :] = False  # a query row with no key: the classic NaN
    for ext in ("npz", "h5"):
        save_report(f"{directory}/demo.{ext}", q, k, v, attn_mask=mask)
        print(f"{directory}/demo.{ext}")


def _demo_features(directory):
    """GQA (4 query heads on 2 K/V heads), packed varlen queries (one sequence empty), a paged
    KV cache of blocks of 16, a sliding window, softcap and ALiBi."""
    rng = np.random.RandomState(2)
    q_lens, kv_lens, block = [5, 0, 12], [40, 3, 17], 16
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], 4, 32)).astype(np.float16)
    max_blocks = 3
    table = rng.permutation(3 * max_blocks + 2)[: 3 * max_blocks].reshape(3, max_blocks).astype(np.int32)
    k = rng.standard_normal((3 * max_blocks + 2, block, 2, 32)).astype(np.float16)
    v = rng.standard_normal((3 * max_blocks + 2, block, 2, 32)).astype(np.float16)
    slopes = np.array([2.0 ** (-8 * (h + 1) / 4) for h in range(4)], dtype=np.float32)
    for ext in ("npz", "h5"):
        save_report(f"{directory}/features.{ext}", q, k, v, is_causal=False, window_size=(8, 0), softcap=20.0,
                    alibi_slopes=slopes, cu_seqlens_q=cu_q, block_table=table,
                    seqused_k=np.array(kv_lens, dtype=np.int32))
        print(f"{directory}/features.{ext}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--demo":
        _demo(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--demo-features":
        _demo_features(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
