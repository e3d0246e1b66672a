#!/usr/bin/python3
"""Writes the SDPA-form bug reports the tests read (run with Debian's /usr/bin/python3).

sdpa_fp16_causal.npz: q, k, v [2,3,17,64] float16 from a seeded normal, is_causal, a bool
attn_mask [2,1,17,17] (True = attend) that leaves row 5 of batch 1 with no key.
sdpa_fp32_bias.npz: q [1,2,9,32], k, v [1,2,13,32] float32, a float attn_mask [2,9,13] with
-inf entries and one fully -inf row, scale 0.3.
sdpa_bf16.npz: q, k, v [1,2,3,4] as bfloat16 bits in uint16 with dtype='bfloat16' (the way
a PyTorch user saves bf16 tensors: t.view(torch.uint16).numpy()), a float attn_mask [3,4]
with -inf, scale 0.5. Values are small multiples of 1/8, exact in bfloat16:
q[b,h,i,d] = (i + d) / 8, k = (2 - j + d) / 8, v = (j * d) / 8.
"""
import os

import numpy as np


def bf16_bits(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    i = np.arange(3).reshape(1, 1, 3, 1)
    d = np.arange(4).reshape(1, 1, 1, 4)
    q = np.broadcast_to((i + d) / 8.0, (1, 2, 3, 4))
    k = np.broadcast_to((2 - i + d) / 8.0, (1, 2, 3, 4))
    v = np.broadcast_to((i * d) / 8.0, (1, 2, 3, 4))
    mask = np.zeros((3, 3), dtype=np.float32)
    mask[0, 2] = -np.inf
    mask[1, 0] = 0.5
    rng = np.random.RandomState(7)
    q16, k16, v16 = (rng.standard_normal((2, 3, 17, 64)).astype(np.float16) for _ in range(3))
    keep = rng.random_sample((2, 1, 17, 17)) < 0.8
    keep[1, 0, 5, :] = False
    np.savez(os.path.join(here, "sdpa_fp16_causal.npz"), q=q16, k=k16, v=v16, attn_mask=keep,
             is_causal=np.bool_(True))

    q32 = rng.standard_normal((1, 2, 9, 32)).astype(np.float32)
    k32, v32 = (rng.standard_normal((1, 2, 13, 32)).astype(np.float32) for _ in range(2))
    bias = rng.standard_normal((2, 9, 13)).astype(np.float32)
    bias[rng.random_sample(bias.shape) < 0.2] = -np.inf
    bias[1, 4, :] = -np.inf
    np.savez_compressed(os.path.join(here, "sdpa_fp32_bias.npz"), q=q32, k=k32, v=v32, attn_mask=bias,
                        scale=np.float32(0.3))

    np.savez(os.path.join(here, "sdpa_bf16.npz"), q=bf16_bits(q), k=bf16_bits(k), v=bf16_bits(v),
             dtype=np.array("bfloat16"), attn_mask=mask, scale=np.float64(0.5))


if __name__ == "__main__":
    main()
