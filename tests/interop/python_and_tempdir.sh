# Sourced by the interop tests: $py, a Python 3 with h5py and numpy (or exit 1 saying what to
# install), and $dir, a temporary folder removed on exit.
py=""
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c "import h5py, numpy" >/dev/null 2>&1; then py=$candidate; break; fi
done
[ -n "$py" ] || { echo "no Python with h5py and numpy (install python3-h5py python3-numpy)"; exit 1; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
