#!/usr/bin/env python3
"""PyTorch SDPA baselines for `flashcore-check bench --baseline FILE`.

Times torch.nn.functional.scaled_dot_product_attention with the flash and cuDNN backends
on the benchmark shapes, fp16, causal and not, and writes one TSV line per measurement:
backend, B, H, S, D, causal (0/1), TFLOP/s counted as 4*B*H*S*S*D / time (the same count
flashcore-check uses, causal or not).
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(16, 16, 2048, 64), (16, 16, 4096, 64), (4, 16, 4096, 128)]
BACKENDS = [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)]


def median_ms(fn, warmup=3, repeats=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main(path, quick):
    shapes = [(2, 4, 512, 64)] if quick else SHAPES
    rows = []
    for b, h, s, d in shapes:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
        for causal in (False, True):
            for name, backend in BACKENDS:
                try:
                    with sdpa_kernel(backend):
                        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                except RuntimeError as e:
                    print(f"{name} B{b} H{h} S{s} D{d} causal={int(causal)}: not available ({str(e).splitlines()[0]})")
                    continue
                tflops = 4.0 * b * h * s * s * d / ms / 1e9
                print(f"{name} B{b} H{h} S{s} D{d} causal={int(causal)}: {ms:.3f} ms, {tflops:.1f} TFLOP/s")
                rows.append(f"{name}\t{b}\t{h}\t{s}\t{d}\t{int(causal)}\t{tflops:.3f}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], "--quick" in sys.argv[2:])
