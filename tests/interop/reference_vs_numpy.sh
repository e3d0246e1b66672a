#!/bin/sh
# `flashcore-check reference` on each committed SDPA report, checked by NumPy/h5py.
#   reference_vs_numpy.sh CLI DATA_DIR SCRIPT_DIR
cli=$1 data=$2 scripts=$3
py=""
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c "import h5py, numpy" >/dev/null 2>&1; then py=$candidate; break; fi
done
[ -n "$py" ] || { echo "no Python with h5py and numpy (install python3-h5py python3-numpy)"; exit 1; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
status=0
for report in "$data"/sdpa_*.npz; do
  "$cli" reference "$report" --out "$dir/ref.h5" --page-width 4 --splits 3 || { status=1; continue; }
  "$py" "$scripts/check_reference.py" "$report" "$dir/ref.h5" || status=1
done
exit $status
