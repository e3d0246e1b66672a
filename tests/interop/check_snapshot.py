#!/usr/bin/env python3
"""h5py's view of a snapshot written by flashcore-check (tests/interop/snapshot_interop.sh).

Checks the schema as docs/snapshot-format.md describes it, dtypes as numpy sees them (fp16
as float16, bf16 as uint16 with attrs['dtype'] == 'bfloat16'), and the values against what
the C++ side wrote: each stage's largest |data * value_scale - reference| / bound, computed
here, equals its end_to_end.max_normalized_error attribute.

  check_snapshot.py FILE [fp16|bf16]
"""
import sys

import h5py
import numpy as np


def check(path, dtype):
    problems = []
    expect = lambda ok, what: ok or problems.append(what)
    with h5py.File(path, "r") as f:
        expect(f.attrs.get("schema") == "flashcore-check", "schema attribute")
        expect(int(f.attrs.get("schema_version")) == 2, "schema_version")
        meta = f["/meta"].attrs
        shape = [int(x) for x in meta["shape"]]
        expect(len(shape) == 5, "/meta shape is [B,H,Sq,Sk,D]")
        expect(meta["dtype"] == dtype, f"/meta dtype {meta['dtype']}")
        for name in ("tool_version", "git_revision", "time", "command", "device_name", "impl"):
            expect(isinstance(meta.get(name), str), f"/meta {name} is a string")
        q = f["/inputs/q"]
        expect(list(q.shape) == [shape[0], shape[1], shape[2], shape[4]], f"/inputs/q shape {q.shape}")
        if dtype == "fp16":
            expect(q.dtype == np.float16, f"/inputs/q dtype {q.dtype}")
        else:
            expect(q.dtype == np.uint16 and q.attrs.get("dtype") == "bfloat16", f"/inputs/q bf16 as {q.dtype}")
        stages = sorted(f["/stages"].items(), key=lambda kv: int(kv[1].attrs["index"]))
        expect(len(stages) > 0, "/stages is empty")
        for name, g in stages:
            if int(g.attrs["stored"]) != 1:
                continue
            data = g["data"][...]
            declared = g.attrs["dtype"]
            want = {"fp32": np.float32, "fp16": np.float16}.get(declared, np.uint16)
            expect(data.dtype == want, f"{name}/data dtype {data.dtype} for {declared}")
            if declared == "bf16":
                data = (data.astype(np.uint32) << 16).view(np.float32)
            ref, bound = g["reference"][...], g["bound"][...]
            expect(ref.dtype == np.float64 and ref.shape == data.shape, f"{name}/reference")
            value = data.astype(np.float64) * float(g.attrs["value_scale"])
            finite = np.isfinite(ref) & np.isfinite(value)
            with np.errstate(divide="ignore", invalid="ignore"):
                err = np.abs(value - ref)
                norm = np.where(err == 0, 0.0, err / bound)
            ours = float(norm[finite].max(initial=0.0))
            theirs = float(g.attrs["end_to_end.max_normalized_error"])
            expect(np.isclose(ours, theirs, rtol=1e-9, atol=1e-12), f"{name}: err/bound {ours} here, {theirs} written")
        expect(f["/result"].attrs["verdict"] in ("pass", "diverged"), "/result verdict")
    for p in problems:
        print(f"{path}: {p}")
    if not problems:
        print(f"{path}: schema, dtypes and values as the C++ side wrote them")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(check(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "fp16"))
