// The example plugin (examples/plugin/) on the GPU through the real command line: its fused
// kernel traced stage by stage (the last tile's running max and sum, the output) passes its
// bounds on ragged shapes, every head dim the FlashAttention tests use, both dtypes and the
// mask parts it declares; its planted fault is found where it says; a capture of its output
// read back by `check` gives the same verdict.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "catch.h"

namespace fc {
namespace {

struct Outcome {
  int exit_code = -1;
  std::string out;
};

Outcome cli(const std::string& arguments) {
  const std::string file = (std::filesystem::temp_directory_path() / ("fc_plugin_gpu_" + std::to_string(::getpid()))).string();
  const std::string command = std::string(FC_CLI_PATH) + " --plugin " + FC_EXAMPLE_PLUGIN + " " + arguments + " >" + file +
                              " 2>&1";
  const int status = std::system(command.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(file);
  o.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove(file);
  return o;
}

}  // namespace

TEST_CASE("the example plugin's fused kernel traces stage by stage and passes", "[gpu][plugin]") {
  const Outcome o = cli("--trace --impl example-fused --shape 2,3,113,203,64 --shape 1,2,1023,1024,128 "
                        "--shape 1,2,256,512,40 --shape 1,1,108,256,256 --shape 1,2,65,65,59 --dtype fp16 --dtype bf16 "
                        "--mask none --mask causal --mask causal-br+padding --dist normal --dist large --seed 1 --seed 2");
  INFO(o.out);
  CHECK(o.exit_code == 0);
  CHECK(o.out.find("120 cases x 1 implementation: 120 pass, 0 diverged, 0 error, 0 skipped") != std::string::npos);
  CHECK(o.out.find("  softmax[3].max ") != std::string::npos);  // Sk 203: tiles 0..3 of 64 keys
  CHECK(o.out.find("  normalize ") != std::string::npos);
}

TEST_CASE("the example plugin's planted fault is found at its normalize, and a mask it lacks is skipped",
          "[gpu][plugin]") {
  Outcome o = cli("faults --impl example-fused");
  INFO(o.out);
  CHECK(o.exit_code == 0);
  CHECK(o.out.find("stage right 1/1 (100%), first index right 1/1 (100%), cause right 1/1 (100%); clean runs without "
                   "alarm 1/1 (100%)") != std::string::npos);
  o = cli("--trace --impl example-fused --shape 1,1,64,64,64 --mask bool");
  CHECK(o.exit_code == 2);  // nothing judged
  CHECK(o.out.find("nothing was judged: every case was skipped") != std::string::npos);
  CHECK(o.out.find("does not handle the mask part bool") != std::string::npos);
}

}  // namespace fc
