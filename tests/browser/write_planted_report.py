#!/usr/bin/python3
"""Writes a bug report in PyTorch SDPA form (.npz) with one planted fault, using Python's
standard library only: q, k, v [1,2,Sq,D] float16 from a seeded normal and an additive
float32 attn_mask [1,2,Sq,Sk] of zeros holding one NaN at (b, h, row, col). That NaN reaches
exactly one score, so the first divergence of every implementation is that element of qk.

  write_planted_report.py OUT.npz SQ SK D B,H,ROW,COL
"""
import random
import struct
import sys
import zipfile


def npy(descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d, " % n for n in shape))
    # Magic, version 1.0, header length; the header padded so the data starts at a multiple of 64.
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data


def main():
    out, sq, sk, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    b, h, row, col = (int(v) for v in sys.argv[5].split(","))
    rng = random.Random(17)
    tensors = {}
    for name, rows in (("q", sq), ("k", sk), ("v", sk)):
        values = [rng.gauss(0.0, 1.0) for _ in range(2 * rows * d)]
        tensors[name] = npy("<f2", (1, 2, rows, d), struct.pack("<%de" % len(values), *values))
    mask = bytearray(4 * 2 * sq * sk)
    struct.pack_into("<f", mask, 4 * (((b * 2 + h) * sq + row) * sk + col), float("nan"))
    tensors["attn_mask"] = npy("<f4", (1, 2, sq, sk), bytes(mask))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in tensors.items():
            z.writestr(name + ".npy", data)


if __name__ == "__main__":
    main()
