#!/usr/bin/env python3
"""Interop check of harness/io/h5_file.cpp against h5py (run by tests/test_hdf5.cpp).

  check_h5_module.py FILE          check a file the C++ writer produced (exit 0 when it
                                   reads as the storage schema says, 1 with reasons if not)
  check_h5_module.py --write FILE  write a file with h5py for the C++ reader to check

The values here and in tests/test_hdf5.cpp (kInteropHalfBits, kInteropBf16Bits) must agree.
"""
import sys

import h5py
import numpy as np

HALF_BITS = [0x3800, 0xBE00, 0x4000, 0x7BFF, 0x8000, 0x0400]  # [[0.5,-1.5,2],[65504,-0,2^-14]]
HALF_VALUES = [[0.5, -1.5, 2.0], [65504.0, -0.0, 2.0**-14]]
BF16_BITS = [0x3F80, 0xC000, 0x7F80, 0x0001]  # 1, -2, inf, smallest subnormal
MASK = [[1, 0], [0, 1]]


class Checker:
    def __init__(self):
        self.failures = []

    def expect(self, condition, what):
        if not condition:
            self.failures.append(what)
        return condition


def check_written_by_module(path):
    c = Checker()
    with h5py.File(path, "r") as f:
        half = f["/interop/half"]
        c.expect(half.dtype == np.float16, f"/interop/half dtype is {half.dtype}, expected float16")
        c.expect(half.shape == (2, 3), f"/interop/half shape is {half.shape}, expected (2, 3)")
        values = half[...]
        c.expect(values.view(np.uint16).ravel().tolist() == HALF_BITS,
                 f"/interop/half bits are {[hex(b) for b in values.view(np.uint16).ravel()]}")
        c.expect(values.tolist() == HALF_VALUES, f"/interop/half values are {values.tolist()}")
        c.expect(bool(np.signbit(values[1, 1])), "/interop/half[1,1] lost the sign of -0")
        c.expect(half.chunks == (2, 3), f"/interop/half chunks are {half.chunks}, expected (2, 3)")
        c.expect(half.compression == "gzip" and half.compression_opts == 4,
                 f"/interop/half compression is {half.compression} {half.compression_opts}, expected gzip 4")
        c.expect(half.shuffle, "/interop/half has no shuffle filter")

        bf16 = f["/interop/bf16"]
        c.expect(bf16.dtype == np.uint16, f"/interop/bf16 dtype is {bf16.dtype}, expected uint16")
        c.expect(bf16[...].tolist() == BF16_BITS, f"/interop/bf16 values are {bf16[...].tolist()}")
        tag = bf16.attrs.get("dtype")
        c.expect(isinstance(tag, str) and tag == "bfloat16", f"/interop/bf16 attrs['dtype'] is {tag!r}")

        mask = f["/interop/mask"]
        c.expect(mask.dtype == np.uint8, f"/interop/mask dtype is {mask.dtype}, expected uint8")
        c.expect(mask[...].tolist() == MASK, f"/interop/mask values are {mask[...].tolist()}")
        tag = mask.attrs.get("dtype")
        c.expect(isinstance(tag, str) and tag == "bool", f"/interop/mask attrs['dtype'] is {tag!r}")

        scalar = f["/interop/scalar"]
        c.expect(scalar.shape == () and scalar.dtype == np.float64 and scalar[()] == 0.375,
                 f"/interop/scalar is {scalar.dtype} {scalar.shape} {scalar[()]!r}")
        c.expect(scalar.chunks is None, f"/interop/scalar is chunked {scalar.chunks}, expected contiguous")

        attrs = f["/interop"].attrs
        note = attrs.get("note")
        c.expect(isinstance(note, str) and note == "flash attention \u2713",
                 f"attrs['note'] is {note!r} ({type(note).__name__}), expected a str")
        seed = attrs.get("seed")
        c.expect(isinstance(seed, np.integer) and seed.dtype == np.int64 and seed == 42,
                 f"attrs['seed'] is {seed!r}, expected int64 42")
        scale = attrs.get("scale")
        c.expect(isinstance(scale, np.floating) and scale.dtype == np.float64 and scale == 0.125,
                 f"attrs['scale'] is {scale!r}, expected float64 0.125")
        shape = attrs.get("shape")
        c.expect(isinstance(shape, np.ndarray) and shape.dtype == np.int64 and shape.tolist() == [2, 4, 128, 64],
                 f"attrs['shape'] is {shape!r}")
        tolerances = attrs.get("tolerances")
        c.expect(isinstance(tolerances, np.ndarray) and tolerances.dtype == np.float64
                 and tolerances.tolist() == [1e-3, 2.5e-2], f"attrs['tolerances'] is {tolerances!r}")
    return c.failures


def write_with_h5py(path):
    with h5py.File(path, "w") as f:
        group = f.create_group("h5py")
        group["half"] = np.array(HALF_BITS, dtype=np.uint16).view(np.float16).reshape(2, 3)
        group["bf16"] = np.array(BF16_BITS, dtype=np.uint16)
        group["bf16"].attrs["dtype"] = "bfloat16"
        group["mask"] = np.array(MASK, dtype=bool)  # h5py: an enum over int8
        group["ints"] = np.arange(6, dtype=np.int64).reshape(2, 3)
        group.create_dataset("lzf", data=np.ones(4, dtype=np.float32), compression="lzf")  # h5py's own filter
        group.attrs["note"] = "written by h5py \u2713"  # variable-length UTF-8
        group.attrs["fixed"] = np.bytes_(b"fixed bytes")  # fixed-length ASCII
        group.attrs["count"] = np.int32(7)
        group.attrs["ratio"] = np.float32(0.5)
        group.attrs["dims"] = np.array([1, 2, 3], dtype=np.uint8)
        group.attrs["list"] = [0.25, 0.5]


def main(argv):
    if len(argv) == 3 and argv[1] == "--write":
        write_with_h5py(argv[2])
        print(f"check_h5_module: wrote {argv[2]}")
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    failures = check_written_by_module(argv[1])
    for failure in failures:
        print(f"check_h5_module: FAIL {failure}")
    if failures:
        return 1
    print("check_h5_module: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
