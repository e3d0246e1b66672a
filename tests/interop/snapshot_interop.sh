#!/bin/sh
# Snapshots read by clients no one here wrote: h5py (values, dtypes) and h5dump -H (schema).
#   snapshot_interop.sh CLI SCRIPT_DIR
cli=$1 scripts=$2
py=""
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c "import h5py, numpy" >/dev/null 2>&1; then py=$candidate; break; fi
done
[ -n "$py" ] || { echo "no Python with h5py and numpy (install python3-h5py python3-numpy)"; exit 1; }
command -v h5dump >/dev/null 2>&1 || { echo "h5dump is not installed (install hdf5-tools)"; exit 1; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
status=0
for dtype in fp16 bf16; do
  "$cli" --trace --impl cpu-emulated-paged --shape 1,2,40,150,64 --mask causal+padding --dtype $dtype --seed 3 \
         --snapshot "$dir/$dtype.h5" >/dev/null || { echo "trace failed"; status=1; continue; }
  "$py" "$scripts/check_snapshot.py" "$dir/$dtype.h5" $dtype || status=1
  header=$(h5dump -H "$dir/$dtype.h5") || { echo "h5dump failed"; status=1; continue; }
  for object in 'GROUP "meta"' 'GROUP "inputs"' 'GROUP "graph"' 'GROUP "stages"' 'GROUP "pv\[2\]"' 'GROUP "result"'; do
    echo "$header" | grep -q "$object" || { echo "h5dump -H does not list $object"; status=1; }
  done
done
[ $status -eq 0 ] && echo "h5dump lists the schema; h5py reads the values"
exit $status
