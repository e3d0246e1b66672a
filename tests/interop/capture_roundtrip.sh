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

# FlashAttention's arguments (GQA, packed varlen queries with an empty sequence, a paged cache,
# window, softcap, ALiBi): a report written by capture, its FP64 reference by the tool, then
# that reference as the kernel's output (fp16, padded [B, H, Sq, D]) captured in both forms.
"$py" - "$src/python" "$dir" <<'PY' || exit 1
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from flashcore_capture import capture
d = sys.argv[2]
rng = np.random.RandomState(2)
q_lens, kv_lens, block, max_blocks = [5, 0, 12], [40, 3, 17], 16, 3
cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
q = rng.standard_normal((cu_q[-1], 4, 32)).astype(np.float16)
table = rng.permutation(3 * max_blocks + 2)[: 3 * max_blocks].reshape(3, max_blocks).astype(np.int32)
k, v = (rng.standard_normal((3 * max_blocks + 2, block, 2, 32)).astype(np.float16) for _ in range(2))
features = dict(window_size=(8, 0), softcap=20.0, alibi_slopes=np.array([0.25, 0.0625, 0.015625, 0.00390625]),
                cu_seqlens_q=cu_q, block_table=table, seqused_k=np.array(kv_lens, dtype=np.int32))
np.savez(f"{d}/features_inputs.npz", q=q, k=k, v=v)
capture(f"{d}/features_report.npz", q, k, v, **features)
import pickle
pickle.dump(features, open(f"{d}/features.pickle", "wb"))
PY
"$cli" reference "$dir/features_report.npz" --out "$dir/features_ref.h5" > /dev/null || { echo "reference of the features report failed"; exit 1; }
"$py" - "$src/python" "$dir" <<'PY' || exit 1
import pickle, sys
import h5py
import numpy as np
sys.path.insert(0, sys.argv[1])
from flashcore_capture import capture
d = sys.argv[2]
i = np.load(f"{d}/features_inputs.npz")
features = pickle.load(open(f"{d}/features.pickle", "rb"))
with h5py.File(f"{d}/features_ref.h5") as f:
    out, lse = f["reference/full/output"][()], f["reference/full/lse"][()]
for ext in ("npz", "h5"):
    capture(f"{d}/features.{ext}", i["q"], i["k"], i["v"], out.astype(np.float16), **features)
bad = out.astype(np.float16)
bad[2, 1, 4] *= 2
capture(f"{d}/features_bad.h5", i["q"], i["k"], i["v"], bad, **features)
PY
for ext in npz h5; do
  "$cli" check "$dir/features.$ext" > "$dir/features.$ext.txt" ||
    { echo "features.$ext (its own reference as the output) did not pass"; cat "$dir/features.$ext.txt"; exit 1; }
done
"$cli" check "$dir/features_bad.h5" > "$dir/features_bad.txt"
code=$?
[ $code -eq 1 ] || { echo "features_bad.h5 exited $code"; cat "$dir/features_bad.txt"; exit 1; }
grep -q "(2,1,4," "$dir/features_bad.txt" || { echo "features_bad.h5: wrong place"; cat "$dir/features_bad.txt"; exit 1; }
echo "captures written by flashcore_capture.py are checked in both forms"
