#!/bin/sh
# The install and the example plugin as a kernel author meets them: `cmake --install` into a
# temporary prefix, examples/plugin/ configured as its own project against the installed
# package (find_package(flashcore-check)) and built, then the installed flashcore-check loads
# it: `list` shows it, `describe` prints the stage graph it declares. Tracing it needs a GPU
# (tests/gpu/test_plugin_gpu.cpp).
#   example_plugin.sh BUILD_DIR SOURCE_DIR CUDA_COMPILER CUDA_ARCHS
build=$1 src=$2 nvcc=$3 archs=$4
prefix=$(mktemp -d) || exit 1
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/install" >"$prefix/install.log" 2>&1 || { cat "$prefix/install.log"; exit 1; }
for f in include/flashcore/plugin.h bin/flashcore-check lib/cmake/flashcore-check/flashcore-checkConfig.cmake; do
  [ -e "$prefix/install/$f" ] || { echo "not installed: $f"; exit 1; }
done
cmake -S "$src/examples/plugin" -B "$prefix/example" -G Ninja -DCMAKE_PREFIX_PATH="$prefix/install" \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DEXAMPLE_CUDA_ARCHS="$archs" >"$prefix/configure.log" 2>&1 \
  || { cat "$prefix/configure.log"; exit 1; }
cmake --build "$prefix/example" >"$prefix/build.log" 2>&1 || { cat "$prefix/build.log"; exit 1; }
plugin="$prefix/example/libexample_attention.so"
cli="$prefix/install/bin/flashcore-check"
"$cli" --plugin "$plugin" list >"$prefix/list.txt" || { cat "$prefix/list.txt"; exit 1; }
grep -q "^  example-fused  *\[gpu\] GPU, plugin example" "$prefix/list.txt" || { echo "list: no example-fused"; cat "$prefix/list.txt"; exit 1; }
grep -q "^  example-no-empty-row-guard " "$prefix/list.txt" || { echo "list: no example fault"; exit 1; }
"$cli" describe --impl example-fused --shape 1,2,100,64 --mask causal --plugin "$plugin" >"$prefix/describe.txt" \
  || { cat "$prefix/describe.txt"; exit 1; }
grep -q "stage graph: online softmax, tiles of 64 keys" "$prefix/describe.txt" \
  && grep -q "    softmax\[1\]: max row_max fp32, sum row_sum fp32" "$prefix/describe.txt" \
  && grep -q "    normalize: output fp16" "$prefix/describe.txt" \
  || { echo "describe: not the declared graph"; cat "$prefix/describe.txt"; exit 1; }
echo "installed, found by find_package, built and loaded: example-fused"
