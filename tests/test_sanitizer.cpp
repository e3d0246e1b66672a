// --sanitize (harness/sanitize/): compute-sanitizer's log read back into findings grouped by
// message, device function and source line, the child's command line built from ours, and the
// refusals before any run. The logs below follow the tools' record layout (a record's first
// line, then indented lines); the run itself under the real tool is a [gpu] test.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.h"
#include "harness/sanitize/sanitized_trace.h"
#include "harness/sanitize/sanitizer_log.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

SanitizerReport parse(const std::string& text, const std::string& tool) {
  std::istringstream in(text);
  return parse_sanitizer_log(in, tool);
}

}  // namespace

TEST_CASE("a racecheck report becomes one finding per race: each kind of access named once, every line, the hazards",
          "[sanitize]") {
  const SanitizerReport r = parse(
      "========= COMPUTE-SANITIZER\n"
      "========= Error: Race reported between Write access at void fc::(anonymous namespace)::fa1_kernel<__half, "
      "(bool)1>(fc::FlashParams, int)+0x1a0 in /src/kernels/fa1_scalar/fa1_kernel.cu:44\n"
      "=========     and Read access at void fc::(anonymous namespace)::fa1_kernel<__half, (bool)1>(fc::FlashParams, "
      "int)+0x4270 in /src/kernels/fa1_scalar/fa1_kernel.cu:52 [4096 hazards]\n"
      "=========     and Read access at fc::mma::load(unsigned int (&)[4], const void *)+0x4290 in mma.cuh:50 [4 hazards]\n"
      "=========\n"
      "========= Warning: Race reported between Read access at void k2(float *)+0x10\n"
      "=========     and Write access at void k2(float *)+0x80 [2 hazards]\n"
      "=========\n"
      "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n",
      "racecheck");
  CHECK(r.summary_seen);
  CHECK(r.errors == 1);
  CHECK(r.warnings == 1);
  REQUIRE(r.findings.size() == 2);
  const SanitizerFinding& race = r.findings[0];
  CHECK(race.severity == "error");
  CHECK(race.message == "Race reported between Write access and Read access");
  CHECK(race.function == "fc::(anonymous namespace)::fa1_kernel<__half, (bool)1>");
  CHECK(race.where == "/src/kernels/fa1_scalar/fa1_kernel.cu:44, /src/kernels/fa1_scalar/fa1_kernel.cu:52, mma.cuh:50");
  CHECK(race.hazards == 4100);  // each other access's, summed
  CHECK(race.records == 1);
  CHECK(race.first_record.find("+0x4270") != std::string::npos);
  CHECK(r.findings[1].severity == "warning");
  CHECK(r.findings[1].function == "k2");
  CHECK(r.findings[1].where.empty());  // no line info in that build
  CHECK(r.findings[1].hazards == 2);
}

TEST_CASE("memcheck records of one access in one kernel group together; host frames and addresses do not split them",
          "[sanitize]") {
  std::string log = "========= COMPUTE-SANITIZER\n";
  for (int thread = 0; thread < 3; ++thread) {
    log += "========= Invalid __global__ read of size 4 bytes\n"
           "=========     at fc::reader(const float *, int)+0x70 in /src/reader.cu:12\n"
           "=========     by thread (" + std::to_string(thread) + ",0,0) in block (0,0,0)\n"
           "=========     Address 0x7f00000" + std::to_string(thread) + "0 is out of bounds\n"
           "=========     and is " + std::to_string(4 * thread + 4) + " bytes after the nearest allocation at 0x7f0000 of size 64 bytes\n"
           "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
           "=========         Host Frame: launch(float*) in /src/host.cpp:99 [0x1234]\n"
           "=========\n";
  }
  log += "========= Invalid __shared__ write of size 4 bytes\n"
         "=========     at fc::writer()+0x20 in /src/writer.cu:7\n"
         "=========\n"
         "========= ERROR SUMMARY: 4 errors\n"
         "========= ERROR SUMMARY: 2 errors were not printed. Use --print-limit option to adjust the number of printed errors\n";
  const SanitizerReport r = parse(log, "memcheck");
  CHECK(r.errors == 4);  // the total, not the count left unprinted
  REQUIRE(r.findings.size() == 2);
  CHECK(r.findings[0].message == "Invalid __global__ read of size 4 bytes");
  CHECK(r.findings[0].function == "fc::reader");
  CHECK(r.findings[0].where == "/src/reader.cu:12");  // not the host frame's line
  CHECK(r.findings[0].records == 3);
  CHECK(r.findings[0].hazards == 0);
  CHECK(r.findings[1].function == "fc::writer");
}

TEST_CASE("a clean report has no findings; a report cut short is counted from its records and says so",
          "[sanitize]") {
  const SanitizerReport clean = parse("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", "synccheck");
  CHECK(clean.summary_seen);
  CHECK(clean.errors == 0);
  CHECK(clean.findings.empty());
  const SanitizerReport cut = parse(
      "========= COMPUTE-SANITIZER\n"
      "========= Barrier error detected. Divergent thread(s) in warp\n"
      "=========     at void fc::k<32>(int)+0x30 in /src/k.cu:3\n"
      "flashcore-check's own line\n"
      "========= Barrier error detected. Divergent thread(s) in warp\n"
      "=========     at void fc::k<32>(int)+0x30 in /src/k.cu:3\n",
      "synccheck");
  CHECK_FALSE(cut.summary_seen);
  CHECK(cut.errors == 2);
  REQUIRE(cut.findings.size() == 1);
  CHECK(cut.findings[0].records == 2);
  CHECK(cut.findings[0].function == "fc::k<32>");
  const SanitizerReport api = parse(
      "========= Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch failure\" on CUDA API call "
      "to cudaStreamSynchronize.\n"
      "=========     Saved host backtrace up to driver entry point at error\n"
      "=========         Host Frame: main in /src/main.cpp:3 [0x11]\n"
      "========= ERROR SUMMARY: 1 error\n",
      "memcheck");
  REQUIRE(api.findings.size() == 1);
  CHECK(api.findings[0].function.empty());
  CHECK(api.findings[0].where.empty());
  // What the tool says about the process is not a finding: it makes the run incomplete.
  const SanitizerReport crashed = parse(
      "========= Error: process didn't terminate successfully\n"
      "========= Target application returned an error\n"
      "========= ERROR SUMMARY: 0 errors\n",
      "racecheck");
  CHECK(crashed.findings.empty());
  CHECK(crashed.errors == 0);
  REQUIRE(crashed.process_messages.size() == 1);
  CHECK(crashed.process_messages[0] == "Error: process didn't terminate successfully");
}

TEST_CASE("a device-side assert names the function that asserted; a name of 200k characters is read, not a crash",
          "[sanitize]") {
  const SanitizerReport asserted = parse(
      "========= Device-side assertion failed\n"
      "=========     at __assertfail+0x40\n"
      "=========     at void fc::check_rows(int)+0x90 in /src/rows.cu:8\n"
      "========= ERROR SUMMARY: 1 error\n",
      "memcheck");
  REQUIRE(asserted.findings.size() == 1);
  CHECK(asserted.findings[0].function == "fc::check_rows");
  CHECK(asserted.findings[0].where == "/src/rows.cu:8");
  const std::string long_name = "fc::k<" + std::string(200000, 'T') + ">";
  const SanitizerReport huge = parse("========= Error: Race reported between Write access at void " + long_name +
                                         "(int)+0x10 in a.cu:1\n=========     and Read access at void " + long_name +
                                         "(int)+0x20 in a.cu:2 [3 hazards]\n",
                                     "racecheck");
  REQUIRE(huge.findings.size() == 1);
  CHECK(huge.findings[0].function == long_name);
  CHECK(huge.findings[0].where == "a.cu:1, a.cu:2");
  CHECK(huge.findings[0].hazards == 3);
  CHECK(huge.findings[0].message == "Race reported between Write access and Read access");
}

TEST_CASE("a kernel's name loses its return type and parameters, never its template arguments", "[sanitize]") {
  CHECK(short_kernel_name("void fc::k<float, (bool)1>(fc::Params, int)") == "fc::k<float, (bool)1>");
  CHECK(short_kernel_name("kernel") == "kernel");
  CHECK(short_kernel_name("void f(void (*)(int))") == "f");
  CHECK(short_kernel_name("  g<(int)3>() ") == "g<(int)3>");
}

TEST_CASE("the sanitized child gets our command line without --sanitize, its JSON in the temporary folder",
          "[sanitize]") {
  using Args = std::vector<std::string>;
  CHECK(child_arguments({"--trace", "--sanitize", "racecheck", "--json", "out.json", "--impl", "naive"}, "/tmp/x.json") ==
        Args{"--trace", "--json", "/tmp/x.json", "--impl", "naive"});
  CHECK(child_arguments({"--sanitize=memcheck", "--trace", "--json=out.json"}, "/tmp/x.json") ==
        Args{"--trace", "--json=/tmp/x.json"});
  CHECK(child_arguments({"--trace", "--sanitize", "initcheck"}, "/tmp/x.json") == Args{"--trace"});
}

TEST_CASE("a sanitized trace is refused in one line, before any run, when there is no tool or no device", "[sanitize]") {
  const fs::path dir = fs::temp_directory_path() / ("fc_sanitize_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fake = dir / "compute-sanitizer", err = dir / "err.txt", json = dir / "out.json";
  std::ofstream(fake) << "#!/bin/sh\nexit 0\n";
  fs::permissions(fake, fs::perms::owner_all);
  struct Case {
    std::string environment, message;
  };
  std::vector<Case> cases = {
      {"FC_COMPUTE_SANITIZER=" + (dir / "none").string(), "none: not an executable file"},
      {"FC_COMPUTE_SANITIZER=" + dir.string(), ": not an executable file"},
      {"FC_COMPUTE_SANITIZER=" + fake.string() + " CUDA_VISIBLE_DEVICES=", "--sanitize: no CUDA device"},
  };
  // Where the toolkit's own copy is installed the last place searched always finds it.
  if (!fs::exists("/usr/local/cuda/bin/compute-sanitizer")) {
    cases.push_back({"FC_COMPUTE_SANITIZER= PATH=/nonexistent CUDA_HOME=/nonexistent", "compute-sanitizer not found on PATH"});
  }
  for (const Case& c : cases) {
    INFO(c.environment);
    // `env -u` first: an FC_COMPUTE_SANITIZER of the caller's must not decide the third case.
    const std::string command = "env -u FC_COMPUTE_SANITIZER " + c.environment + " " + FC_CLI_PATH +
                                " --trace --impl cpu-emulated --shape 1,1,16,64 --sanitize racecheck --json " +
                                json.string() + " >/dev/null 2>" + err.string();
    const int status = std::system(command.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    std::ifstream in(err);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find(c.message) != std::string::npos);
    CHECK_FALSE(fs::exists(json));
  }
  fs::remove_all(dir);
}

}  // namespace fc
