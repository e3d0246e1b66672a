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
from flashcore_capture import capture  # noqa: E402  (the one writer of reports and captures)


def save_report(path, q, k, v, attn_mask=None, scale=None, is_causal=False, window_size=None, softcap=None,
                alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, block_table=None, seqused_k=None):
    """A report holds the inputs alone: python/flashcore_capture.py's capture without outputs."""
    capture(path, q, k, v, attn_mask=attn_mask, scale=scale, is_causal=is_causal, window_size=window_size,
            softcap=softcap, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
            block_table=block_table, seqused_k=seqused_k)


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
