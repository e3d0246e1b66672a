#!/usr/bin/env python3
"""Writes the .npz fixtures that tests/test_npz.cpp reads, next to this script.

Run once with a Python that has NumPy (/usr/bin/python3 make_npz_fixtures.py) and commit
the outputs. Every value is a formula over the flat C-order index i that the C++ test
repeats, so the test asserts exact values, not just shapes.
"""
import io
import os
import struct
import zipfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def arange_as(n, dtype):
    return np.arange(n).astype(dtype)


def fixture_arrays():
    """The arrays of stored.npz and compressed.npz (value formulas in test_npz.cpp)."""
    return {
        "f16": (arange_as(12, np.float64) * 0.25 - 1).astype(np.float16).reshape(3, 4),
        "f32": ((arange_as(24, np.float64) - 7) / 8).astype(np.float32).reshape(2, 3, 4),
        "mask": np.arange(10) % 3 == 0,
        "u16": (arange_as(6, np.uint16) * np.uint16(10007)).reshape(2, 3),
        "i64": arange_as(4, np.int64) - 2**40,
        # C-order value i, stored column-major (fortran_order True in the header).
        "fortran": np.asfortranarray(arange_as(24, np.float32).reshape(2, 3, 4)),
        "big_f64": (arange_as(5, np.float64) * 1.5 - 2).astype(">f8"),
        "big_i32": (arange_as(4, np.int64) * -70000 + 3).astype(">i4"),
        "big_fortran": np.asfortranarray((arange_as(6, np.float64) - 2.5).astype(">f4").reshape(2, 3)),
        "scalar": np.array(3.25),
        "flag": np.array(True),
        "label": np.array("\u03bc-attn", dtype="<U8"),
        "label1": np.array(["v2"], dtype="<U8"),
        "tag": np.array(b"qk", dtype="S4"),
        "empty": np.zeros((0, 3), np.float32),
    }


def npy_bytes(array):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    return buf.getvalue()


def check_headers(arrays):
    """The fixtures mean something only if NumPy wrote what the test expects of them."""
    def header(name):
        return npy_bytes(arrays[name])[:128].decode("latin1")
    assert "'fortran_order': True" in header("fortran")
    assert "'fortran_order': True" in header("big_fortran") and "'>f4'" in header("big_fortran")
    assert "'>f8'" in header("big_f64") and "'>i4'" in header("big_i32")
    assert "'<U8'" in header("label") and "'shape': ()" in header("label")
    assert "'|b1'" in header("flag") and "'shape': ()" in header("flag")


def write_zip(path, members):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def write_zip64_by_hand(path, members, comment):
    """A stored archive whose central directory uses ZIP64 for every size and offset
    (0x0001 extra fields, ZIP64 end record and locator), which zipfile only writes for
    archives over 4 GiB. NumPy must be able to load it back."""
    dos_date = (1 << 5) | 1  # 1980-01-01
    local, central = b"", b""
    for name, data in members.items():
        crc = zlib.crc32(data)
        name_b = name.encode()
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, dos_date, crc,
                             0xFFFFFFFF, 0xFFFFFFFF, len(name_b), 20)
        local += name_b + struct.pack("<HHQQ", 0x0001, 16, len(data), len(data)) + data
        extra = struct.pack("<HHQQQ", 0x0001, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, dos_date,
                               crc, 0xFFFFFFFF, 0xFFFFFFFF, len(name_b), len(extra), 0, 0, 0,
                               0, 0xFFFFFFFF)
        central += name_b + extra
    cd_offset, count = len(local), len(members)
    eocd64_offset = cd_offset + len(central)
    eocd64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count,
                         len(central), cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, eocd64_offset, 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                       0xFFFFFFFF, len(comment)) + comment
    with open(path, "wb") as f:
        f.write(local + central + eocd64 + locator + eocd)


def main():
    arrays = fixture_arrays()
    check_headers(arrays)
    np.savez(os.path.join(HERE, "stored.npz"), **arrays)
    np.savez_compressed(os.path.join(HERE, "compressed.npz"), **arrays)

    z = arange_as(5, np.int64) * 3
    write_zip64_by_hand(os.path.join(HERE, "zip64.npz"),
                        {"z.npy": npy_bytes(z), "flag.npy": npy_bytes(np.array(False))},
                        b"a comment written by make_npz_fixtures.py")

    # Bad .npy images inside otherwise valid archives (written by zipfile, CRC correct).
    q = np.arange(6, dtype=np.float32).reshape(2, 3)
    write_zip(os.path.join(HERE, "bad_dtype.npz"),
              {"q.npy": npy_bytes(np.arange(3, dtype=np.complex64))})
    write_zip(os.path.join(HERE, "bad_length.npz"), {"q.npy": npy_bytes(q)[:-4]})
    broken = npy_bytes(q).replace(b"'shape': (2, 3)", b"'shape': (2, 3 ")
    assert broken != npy_bytes(q)
    write_zip(os.path.join(HERE, "bad_header.npz"), {"q.npy": broken})

    # Everything that should load does load with NumPy itself.
    for name in ("stored.npz", "compressed.npz"):
        with np.load(os.path.join(HERE, name)) as loaded:
            for key, value in arrays.items():
                assert np.array_equal(loaded[key], value), (name, key)
    with np.load(os.path.join(HERE, "zip64.npz")) as loaded:
        assert np.array_equal(loaded["z"], z) and not loaded["flag"]
        assert zipfile.ZipFile(os.path.join(HERE, "zip64.npz")).comment.startswith(b"a comment")


if __name__ == "__main__":
    main()
