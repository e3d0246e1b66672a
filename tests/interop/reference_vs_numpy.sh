#!/bin/sh
# `flashcore-check reference` on each committed SDPA report, checked by NumPy/h5py.
#   reference_vs_numpy.sh CLI DATA_DIR SCRIPT_DIR
cli=$1 data=$2 scripts=$3
. "$(dirname "$0")/python_and_tempdir.sh"
status=0
for report in "$data"/sdpa_*.npz; do
  "$cli" reference "$report" --out "$dir/ref.h5" --page-width 4 --splits 3 || { status=1; continue; }
  "$py" "$scripts/check_reference.py" "$report" "$dir/ref.h5" || status=1
done
exit $status
