#!/bin/sh
# scripts/write_bug_report.py as a PyTorch user runs it (numpy and h5py only here): both forms
# of the demo report read back by flashcore-check as the same case.
#   bug_report_roundtrip.sh CLI SOURCE_DIR
cli=$1 src=$2
. "$(dirname "$0")/python_and_tempdir.sh"
"$py" "$src/scripts/write_bug_report.py" --demo "$dir" || exit 1
for ext in npz h5; do
  "$cli" triage "$dir/demo.$ext" > "$dir/$ext.txt"
  code=$?
  [ $code -eq 0 ] || { echo "triage of demo.$ext exited $code"; cat "$dir/$ext.txt"; exit 1; }
  grep -q "fully-masked-rows: 2 query rows" "$dir/$ext.txt" || { echo "demo.$ext: masked rows not found"; exit 1; }
  "$cli" reference "$dir/demo.$ext" --out "$dir/ref.$ext.h5" >/dev/null || exit 1
done
"$py" - "$dir/ref.npz.h5" "$dir/ref.h5.h5" <<'PY' || exit 1
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["/reference/full/output"][...] for p in sys.argv[1:])
sys.exit(0 if np.array_equal(a, b) else 1)
PY
# FlashAttention's layouts and options: GQA, packed varlen queries, a paged KV cache, a
# window, softcap and ALiBi, in both forms.
"$py" "$src/scripts/write_bug_report.py" --demo-features "$dir" || exit 1
for ext in npz h5; do
  "$cli" reference "$dir/features.$ext" --out "$dir/features.$ext.ref.h5" > "$dir/features.$ext.txt" || {
    echo "reference of features.$ext failed"; cat "$dir/features.$ext.txt"; exit 1; }
  grep -q "B3 H4:2 Sq12 Sk40 D32" "$dir/features.$ext.txt" || { echo "features.$ext: shape"; cat "$dir/features.$ext.txt"; exit 1; }
done
"$py" - "$dir/features.npz.ref.h5" "$dir/features.h5.ref.h5" <<'PY' || exit 1
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["/reference/full/output"][...] for p in sys.argv[1:])
sys.exit(0 if np.array_equal(a, b) and np.isfinite(a).all() else 1)
PY
echo "the .npz and .h5 reports read back as the same case"
