// --sanitize on the device, through the real command line and the real compute-sanitizer: a
// barrier dropped between a K/V tile's copy into shared memory and its use (wmma-fused's
// missing-sync) is reported by racecheck, its device function and source lines named, in the terminal and in --json, with
// exit 1; the clean kernel under the same tool reports nothing and exits 0.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "catch.h"
#include "core/error.h"
#include "core/json.h"
#include "harness/sanitize/sanitized_trace.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string out;
  Json json;
};

Outcome sanitized(const std::string& arguments) {
  const fs::path dir = fs::temp_directory_path() / ("fc_sanitize_gpu_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path out = dir / "out.txt", json = dir / "report.json";
  const std::string command = std::string(FC_CLI_PATH) + " --trace " + arguments + " --sanitize racecheck --json " +
                              json.string() + " >" + out.string() + " 2>&1";
  const int status = std::system(command.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  o.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (fs::exists(json)) {
    std::ifstream j(json);
    o.json = Json::parse(j);
  }
  fs::remove_all(dir);
  return o;
}

bool have_compute_sanitizer() {
  try {
    find_compute_sanitizer();
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("a trace under racecheck reports a dropped barrier the numbers may not show, and nothing on the clean kernel",
          "[gpu][sanitize]") {
  // The CUDA toolkit that built this ships it: a GPU machine without it cannot run this test.
  INFO("compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, FC_COMPUTE_SANITIZER)");
  REQUIRE(have_compute_sanitizer());
  const std::string one = "--impl wmma-fused --shape 1,2,256,256,64 --mask causal --seed 3";
  const Outcome planted = sanitized(one + " --inject missing-sync");
  INFO(planted.out);
  CHECK(planted.exit_code == 1);
  CHECK(planted.out.find("compute-sanitizer racecheck: ") != std::string::npos);
  REQUIRE(planted.json.contains("sanitizer"));
  const Json& s = planted.json["sanitizer"];
  CHECK(s["tool"] == "racecheck");
  CHECK(s["complete"] == true);
  CHECK(s["errors"].get<long long>() > 0);
  REQUIRE(!s["findings"].empty());
  CHECK_FALSE(s["findings"][0]["function"].get<std::string>().empty());
  CHECK_FALSE(s["findings"][0]["where"].get<std::string>().empty());  // the kernels carry line info
  CHECK(s["findings"][0]["hazards"].get<long long>() > 0);
  CHECK(planted.json["command"].get<std::string>().find("--sanitize racecheck") != std::string::npos);

  const Outcome clean = sanitized(one);
  INFO(clean.out);
  CHECK(clean.exit_code == 0);
  REQUIRE(clean.json.contains("sanitizer"));
  CHECK(clean.json["sanitizer"]["errors"] == 0);
  CHECK(clean.json["sanitizer"]["findings"].empty());
  CHECK(clean.out.find("compute-sanitizer racecheck: 0 errors, 0 warnings") != std::string::npos);
}

}  // namespace fc
