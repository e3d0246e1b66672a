#!/bin/sh
# python/flashcore_capture.py as a kernel author runs it (numpy and h5py only here): a NumPy
# FP64 attention stored in fp16 with its lse, in both forms, passes `check`; the same output
# with one row doubled is found at that row; a bad keyword is refused in Python.
#   capture_roundtrip.sh CLI SOURCE_DIR
cli=$1 src=$2
. "$(dirname "$0")/python_and_tempdir.sh"
"$py" - "$src/python" "$dir" <<'PY' || exit 1
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from flashcore_capture import capture
d = sys.argv[2]
rng = np.random.default_rng(5)
b, h, sq, sk, dim = 2, 3, 45, 70, 64
q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((b, h, sq, dim), (b, h, sk, dim), (b, h, sk, dim)))
s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(dim)
s = np.where(np.tril(np.ones((sq, sk), bool)), s, -np.inf)  # is_causal: top-left
m = s.max(-1, keepdims=True)
p = np.exp(s - m)
l = p.sum(-1, keepdims=True)
out = (p / l) @ v.astype(np.float64)
lse = (m + np.log(l))[..., 0]
for ext in ("npz", "h5"):
    capture(f"{d}/good.{ext}", q, k, v, out.astype(np.float16), lse=lse[..., None], is_causal=True, impl="numpy")
bad = out.astype(np.float16)
bad[1, 2, 30] *= 2
capture(f"{d}/bad.npz", q, k, v, bad, is_causal=True)
try:
    capture(f"{d}/typo.npz", q, k, v, bad, probz=p)
    sys.exit("a misspelt intermediate was accepted")
except TypeError:
    pass
PY
for ext in npz h5; do
  "$cli" check "$dir/good.$ext" > "$dir/$ext.txt" || { echo "good.$ext did not pass"; cat "$dir/$ext.txt"; exit 1; }
  grep -q "^numpy | " "$dir/$ext.txt" || { echo "good.$ext: impl name not read"; exit 1; }
  grep -q "^  lse " "$dir/$ext.txt" || { echo "good.$ext: lse not checked"; exit 1; }
done
"$cli" check "$dir/bad.npz" > "$dir/bad.txt"
code=$?
[ $code -eq 1 ] || { echo "bad.npz exited $code"; cat "$dir/bad.txt"; exit 1; }
grep -q "first divergence: pv (pv) at (b,h,row,col) (1,2,30," "$dir/bad.txt" || { echo "bad.npz: wrong place"; cat "$dir/bad.txt"; exit 1; }
echo "captures written by flashcore_capture.py are checked in both forms"
