#!/usr/bin/env python3
"""PyTorch's SDPA backends judged by flashcore-check over the grid of FlashAttention's own
forward test (tests/test_flash_attn.py, test_flash_attn_output). Runs on the GPU box:

    ./scripts/setup && python3 scripts/check_torch_sdpa.py --out /tmp/sdpa

For each backend (flash, efficient, cudnn, math) and each case it runs
torch.nn.functional.scaled_dot_product_attention under torch.nn.attention.sdpa_kernel, keeps
q, k, v and the output and, where the backend's own op returns it, the log-sum-exp
(python/flashcore_capture.py), then judges every capture with ONE `flashcore-check check` call
(captures in parallel, one per core). The grid:

    (Sq, Sk)  (113,203) (128,217) (113,211) (108,256) (256,512) (512,256) (1024,1024)
              (1023,1024) (1024,1023) (2048,2048)
    D         32 40 59 64 96 111 128 160 192 224 256, where the backend runs it
    causal    off, on (PyTorch's is_causal: top-left)
    dtype     fp16, bf16
    masks     a padded boolean mask with fully masked rows, for every (Sq, Sk), D 64 and 128,
              both dtypes, B 2 (each batch its own key length)

B and H stay small (--batch, --heads: 1 and 2): the FP64 reference is the cost. It prints per
backend: cases, passes, findings, the worst err/bound, cases the backend does not run, and
each finding with its cause; --json keeps check's report. Exit status: 0 every case passes,
1 a finding, 2 an error.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from flashcore_capture import capture  # noqa: E402

SEQLENS = [(113, 203), (128, 217), (113, 211), (108, 256), (256, 512), (512, 256), (1024, 1024), (1023, 1024),
           (1024, 1023), (2048, 2048)]
HEAD_DIMS = [32, 40, 59, 64, 96, 111, 128, 160, 192, 224, 256]
MASK_HEAD_DIMS = [64, 128]
BACKENDS = ["flash", "efficient", "cudnn", "math"]


def grid(quick):
    """(Sq, Sk, D, causal, masked) of every case."""
    seqlens = SEQLENS[:3] + SEQLENS[-2:-1] if quick else SEQLENS
    dims = [40, 64, 111, 256] if quick else HEAD_DIMS
    for sq, sk in seqlens:
        for d in dims:
            for causal in (False, True):
                yield sq, sk, d, causal, False
        for d in MASK_HEAD_DIMS:
            yield sq, sk, d, False, True


def padded_mask(torch, b, sq, sk, device):
    """[B,1,Sq,Sk] bool, True = attend: batch i keeps its first len_i keys, and rows 0, Sq/2
    and Sq-1 of batch 0 attend to nothing (fully masked)."""
    mask = torch.ones(b, 1, sq, sk, dtype=torch.bool, device=device)
    for i in range(b):
        mask[i, :, :, max(1, sk - 17 * (i + 1)):] = False
    for row in (0, sq // 2, sq - 1):
        mask[0, :, row, :] = False
    return mask


class Backends:
    """Selecting a backend, and its lse from its own op (the public API returns none)."""

    def __init__(self, torch):
        self.torch = torch
        from torch.nn.attention import SDPBackend, sdpa_kernel  # PyTorch 2.3 and later
        self.sdpa_kernel = sdpa_kernel
        names = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "math": "MATH"}
        self.kinds = {b: getattr(SDPBackend, n) for b, n in names.items() if hasattr(SDPBackend, n)}

    def output(self, backend, q, k, v, mask, causal):
        if backend not in self.kinds:
            raise RuntimeError(f"this PyTorch has no {backend} backend")
        F = self.torch.nn.functional
        with self.sdpa_kernel([self.kinds[backend]]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no kernel available" warnings: we report the refusal
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

    def lse(self, backend, q, k, v, mask, causal):
        """The backend's own lse, or None where its op does not give one in this PyTorch."""
        aten = self.torch.ops.aten
        scale = 1.0 / math.sqrt(q.shape[-1])
        try:
            if backend == "flash" and mask is None:
                return aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)[:2]
            if backend == "efficient":
                bias = None if mask is None else self.torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(
                    ~mask, float("-inf"))
                return aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, causal, scale=scale)[:2]
            if backend == "cudnn" and mask is None:
                return aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False, scale=scale)[:2]
        except (RuntimeError, TypeError):
            return None
        return None


def run_backends(args, torch, out_dir):
    """Captures every case of every backend; returns {backend: {"refused": n, "lse": m}}."""
    backends = Backends(torch)
    device = "cuda"
    stats = {b: {"refused": 0, "lse": 0, "captured": 0} for b in args.backends}
    for index, (sq, sk, d, causal, masked) in enumerate(grid(args.quick)):
        for dtype_name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            b = 2 if masked else args.batch
            g = torch.Generator(device=device).manual_seed(1000 + index)
            q, k, v = (torch.randn(b, args.heads, s, d, generator=g, device=device, dtype=dtype) for s in (sq, sk, sk))
            mask = padded_mask(torch, b, sq, sk, device) if masked else None
            name = f"{sq}x{sk}-d{d}-{'causal' if causal else 'mask' if masked else 'full'}-{dtype_name}"
            for backend in args.backends:
                try:
                    out = backends.output(backend, q, k, v, mask, causal)
                except RuntimeError:
                    stats[backend]["refused"] += 1  # the backend does not run this case
                    continue
                torch.cuda.synchronize()
                lse = None
                own = backends.lse(backend, q, k, v, mask, causal)
                if own is not None and torch.equal(own[0], out):  # the same kernel as the public call
                    lse = own[1]
                    stats[backend]["lse"] += 1
                folder = os.path.join(out_dir, backend)
                os.makedirs(folder, exist_ok=True)
                capture(os.path.join(folder, name + ".npz"), q, k, v, out, lse=lse, attn_mask=mask, is_causal=causal,
                        impl="sdpa-" + backend)
                stats[backend]["captured"] += 1
    return stats


def finite(x):
    # A non-finite number is {"nonfinite": "nan"|"inf"|"-inf"} (docs/json-output.md): count it as inf.
    return float("inf") if isinstance(x, dict) else x


def summarize(report, stats, backends):
    worst = {b: 0.0 for b in backends}
    counts = {b: {"pass": 0, "diverged": 0, "error": 0} for b in backends}
    findings = {b: [] for b in backends}
    for case in report["cases"]:
        backend = case["impl"].replace("sdpa-", "")
        counts[backend][case["verdict"]] = counts[backend].get(case["verdict"], 0) + 1
        for stage in case["stages"]:
            for metrics in (stage.get("end_to_end"), stage.get("local")):
                if metrics:
                    worst[backend] = max(worst[backend], finite(metrics["max_normalized_error"]))
        if case["verdict"] != "pass":
            d = case.get("first_divergence") or {}
            findings[backend].append((case["case"]["label"], d.get("output", "-"), d.get("cause", case.get("reason", "")),
                                      d.get("evidence", "")))
    print(f"\n{'backend':10} {'cases':>6} {'pass':>6} {'findings':>9} {'error':>6} {'worst err/bound':>16} "
          f"{'not run':>8} {'lse checked':>12}")
    for b in backends:
        n = sum(counts[b].values())
        print(f"{b:10} {n:6} {counts[b]['pass']:6} {counts[b]['diverged']:9} {counts[b]['error']:6} "
              f"{worst[b]:16.4g} {stats[b]['refused']:8} {stats[b]['lse']:12}")
    for b in backends:
        if not findings[b]:
            continue
        causes = {}
        for _, output, cause, _ in findings[b]:
            causes[(output, cause)] = causes.get((output, cause), 0) + 1
        print(f"\n{b}: {len(findings[b])} findings: " +
              ", ".join(f"{n} x {cause} at {output}" for (output, cause), n in sorted(causes.items())))
        for label, output, cause, evidence in findings[b][:20]:
            print(f"  {label}: {output} {cause}: {evidence}")
        if len(findings[b]) > 20:
            print(f"  ... {len(findings[b]) - 20} more in the JSON report")
    return sum(c["diverged"] + c["error"] for c in counts.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "flashcore-check"))
    parser.add_argument("--out", default="/tmp/flashcore-sdpa", help="folder for the captures (emptied first)")
    parser.add_argument("--backends", nargs="+", default=BACKENDS, choices=BACKENDS)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a few shapes and head dims (a smoke test)")
    parser.add_argument("--json", help="keep check's JSON report here")
    parser.add_argument("--keep", action="store_true", help="keep the captures")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("check_torch_sdpa: PyTorch is not installed", file=sys.stderr)
        return 2
    try:
        import torch.nn.attention  # noqa: F401
    except ImportError:
        print(f"check_torch_sdpa: torch {torch.__version__} has no torch.nn.attention.sdpa_kernel (2.3 and later)",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("check_torch_sdpa: no CUDA device", file=sys.stderr)
        return 2
    if not os.access(args.cli, os.X_OK):
        print(f"check_torch_sdpa: {args.cli}: no flashcore-check (./scripts/setup builds it)", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    start = time.time()
    stats = run_backends(args, torch, args.out)
    print(f"captured {sum(s['captured'] for s in stats.values())} outputs in {time.time() - start:.0f} s")
    folders = [os.path.join(args.out, b) for b in args.backends if stats[b]["captured"]]
    if not folders:
        print("check_torch_sdpa: no backend ran any case", file=sys.stderr)
        return 2
    report = args.json or os.path.join(args.out, "check.json")
    start = time.time()
    with open(os.path.join(args.out, "check.txt"), "w") as log:
        code = subprocess.call([args.cli, "check", *folders, "--json", report], stdout=log)
    print(f"flashcore-check check: exit {code} in {time.time() - start:.0f} s (tables: {args.out}/check.txt)")
    if code not in (0, 1):
        with open(os.path.join(args.out, "check.txt")) as log:
            sys.stdout.write(log.read()[-2000:])
        return 2
    with open(report) as f:
        failed = summarize(json.load(f), stats, args.backends)
    if not args.keep:
        for b in args.backends:
            shutil.rmtree(os.path.join(args.out, b), ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
