#!/bin/sh
# Snapshots read by clients no one here wrote: h5py (values, dtypes) and h5dump -H (schema).
#   snapshot_interop.sh CLI SCRIPT_DIR
cli=$1 scripts=$2
. "$(dirname "$0")/python_and_tempdir.sh"
command -v h5dump >/dev/null 2>&1 || { echo "h5dump is not installed (install hdf5-tools)"; exit 1; }
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
