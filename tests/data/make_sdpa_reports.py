#!/usr/bin/python3
"""Writes the SDPA-form bug reports the tests read (run with Debian's /usr/bin/python3).

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
    np.savez(os.path.join(here, "sdpa_bf16.npz"), q=bf16_bits(q), k=bf16_bits(k), v=bf16_bits(v),
             dtype=np.array("bfloat16"), attn_mask=mask, scale=np.float64(0.5))


if __name__ == "__main__":
    main()
