// The command line as a new user meets it on a machine without a GPU, following the README:
// each check here is one thing that once went wrong (docs: issue 17, "first contact").
// Every command runs as a subprocess with the GPUs hidden, stdout and stderr kept apart.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "harness/inputs.h"
#include "harness/trace/judge.h"
#include "kernels/implementation.h"
#include "reports/table.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

struct Run {
  int exit_code = -1;
  std::string out, err;
  std::vector<std::string> err_lines;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A folder of its own for each test, removed after.
struct Folder {
  fs::path dir;
  explicit Folder(const std::string& name) {
    dir = fs::temp_directory_path() / ("fc_first_contact_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  std::string operator/(const std::string& file) const { return (dir / file).string(); }

  // flashcore-check ARGUMENTS in this folder, without a GPU.
  Run run(const std::string& arguments) const {
    const std::string command = "cd " + dir.string() + " && CUDA_VISIBLE_DEVICES= " + std::string(FC_CLI_PATH) + " " +
                                arguments + " >" + (dir / "stdout.txt").string() + " 2>" + (dir / "stderr.txt").string();
    const int status = std::system(command.c_str());
    Run r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir / "stdout.txt");
    r.err = slurp(dir / "stderr.txt");
    std::istringstream lines(r.err);
    for (std::string line; std::getline(lines, line);) r.err_lines.push_back(line);
    return r;
  }
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A usage or input error: exit 2, one line on stderr containing `message`, nothing on stdout.
void check_refused_before_work(const Run& r, const std::string& message) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  REQUIRE(r.err_lines.size() == 1);
  CHECK(has(r.err_lines[0], message));
  CHECK(r.out.empty());
}

const std::string kBug = "--trace --impl cpu-emulated-paged --inject first-page-rescale --shape 1,1,70,64";

}  // namespace

TEST_CASE("the README's snapshot example writes one file that replay reads", "[first-contact]") {
  Folder f("snapshot");
  const Run trace = f.run(kBug + " --seed 1 2 --snapshot bug.h5");
  CHECK(trace.exit_code == 1);
  INFO(trace.out);
  CHECK(has(trace.out, "snapshot: bug.h5 holds cpu-emulated-paged on B1 H1 S70 D64 fp16 none normal seed 1 (case 1 of 2, "
                       "the first that diverged"));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(f.dir)) {
    if (e.path().extension() == ".h5") files.push_back(e.path().filename().string());
  }
  CHECK(files == std::vector<std::string>{"bug.h5"});
  const Run replay = f.run("replay bug.h5");
  CHECK(replay.exit_code == 1);
  CHECK(has(replay.out, "the replay agrees"));

  // A folder keeps every case.
  fs::create_directories(f.dir / "all");
  CHECK(f.run(kBug + " --seed 1 2 --snapshot all").exit_code == 1);
  CHECK(fs::exists(f.dir / "all" / "cpu-emulated-paged.1.h5"));
  CHECK(fs::exists(f.dir / "all" / "cpu-emulated-paged.2.h5"));
}

TEST_CASE("diff lists a stage only one snapshot has first, as a difference", "[first-contact]") {
  Folder f("diff");
  REQUIRE(f.run("--trace --impl cpu-emulated-paged --shape 1,1,70,64 --snapshot clean.h5").exit_code == 0);
  REQUIRE(f.run(kBug + " --snapshot bug.h5").exit_code == 1);
  const Run diff = f.run("diff clean.h5 bug.h5");
  INFO(diff.out);
  CHECK(diff.exit_code == 1);
  const std::size_t only = diff.out.find("rescale[0]"), first_common = diff.out.find("qk[0]");
  REQUIRE(only != std::string::npos);
  REQUIRE(first_common != std::string::npos);
  CHECK(only < first_common);
  CHECK(has(diff.out, "only in B (bug.h5)"));
  CHECK(has(diff.out, "1 stage output in one snapshot only"));

  // The production build's outputs are compared too (their tensors follow the trace build's),
  // in columns that line up under the headers however long the name.
  const std::vector<std::string> lines = lines_of(diff.out);
  const auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return has(l, "B err/bound"); });
  const auto lse = std::find_if(lines.begin(), lines.end(),
                                [](const std::string& l) { return l.rfind("  normalize.lse (production) ", 0) == 0; });
  REQUIRE(header != lines.end());
  REQUIRE(lse != lines.end());
  const std::size_t end = header->find("B err/bound") + std::string("B err/bound").size();
  REQUIRE(lse->size() > end);
  CHECK((*lse)[end - 1] != ' ');
  CHECK((*lse)[end] == ' ');
  CHECK(has(*lse, "  0  -"));  // the planted fault leaves the production lse unchanged
}

TEST_CASE("diff of two different cases says which of shape, dtype, scale, mask and inputs differ", "[first-contact]") {
  Folder f("diff_cases");
  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --snapshot a.h5").exit_code == 0);
  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --seed 2 --snapshot b.h5").exit_code == 0);
  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,24,64 --mask causal --snapshot c.h5").exit_code == 0);
  Run r = f.run("diff a.h5 b.h5");
  check_refused_before_work(r, "b.h5: not the same case as the first snapshot: inputs q, k, v differ");
  r = f.run("diff a.h5 c.h5");
  check_refused_before_work(r, "shape B1 H1 S16 D64 vs B1 H1 S24 D64; mask none vs causal");
}

TEST_CASE("output paths are checked before any work", "[first-contact]") {
  Folder f("outputs");
  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --fixture --snapshot good.h5").exit_code == 0);
  const std::string nowhere = "/nonexistent-dir/o.json";
  check_refused_before_work(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --json " + nowhere), nowhere);
  check_refused_before_work(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --junit " + nowhere), nowhere);
  check_refused_before_work(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --snapshot /nonexistent-dir/s.h5"),
                            "/nonexistent-dir/s.h5");
  check_refused_before_work(f.run("replay good.h5 --json " + nowhere), nowhere);
  check_refused_before_work(f.run("faults --fault masked-row-nan --json " + nowhere), nowhere);
  check_refused_before_work(f.run("triage good.h5 --json " + nowhere), nowhere);
  check_refused_before_work(f.run("triage good.h5 --minimize /nonexistent-dir/m.h5"), "/nonexistent-dir/m.h5");
  check_refused_before_work(f.run("reference good.h5 --out /nonexistent-dir/r.h5"), "/nonexistent-dir/r.h5");
  fs::create_directories(f.dir / "fx");
  fs::copy_file(f.dir / "good.h5", f.dir / "fx" / "good.h5");
  check_refused_before_work(f.run("fixtures fx --junit " + nowhere), nowhere);
  const std::string page = "/nonexistent-dir/o.html";
  check_refused_before_work(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --html " + page), page);
  check_refused_before_work(f.run("faults --fault masked-row-nan --html " + page), page);
  check_refused_before_work(f.run("check good.h5 --json " + nowhere), nowhere);
  check_refused_before_work(f.run("sensitivity --impl cpu-emulated --sk 64 --json " + nowhere), nowhere);
  CHECK_FALSE(fs::exists("/nonexistent-dir"));
}

TEST_CASE("bad case options are refused before any banner, and banners go to stderr", "[first-contact]") {
  Folder f("validate");
  check_refused_before_work(f.run("--trace --shape 1,2"), "--shape '1,2'");
  check_refused_before_work(f.run("--trace --mask sideways"), "--mask 'sideways'");
  check_refused_before_work(f.run("--trace --dtype fp8"), "--dtype 'fp8'");
  check_refused_before_work(f.run("--trace --dist wild"), "--dist 'wild'");
  const Run ok = f.run("--trace --shape 1,1,16,64");
  CHECK(ok.exit_code == 0);
  CHECK(has(ok.err, "no CUDA device"));
  CHECK_FALSE(has(ok.out, "no CUDA device"));
  // Implementations named, and all of them run: nothing to say (an error after it was a second line).
  const Run named = f.run("--trace --impl cpu-emulated --shape 1,1,16,64");
  CHECK(named.exit_code == 0);
  CHECK_FALSE(has(named.err, "no CUDA device"));
}

TEST_CASE("an unknown fault and one no selected implementation has get different --inject messages", "[first-contact]") {
  Folder f("inject");
  check_refused_before_work(f.run("--trace --inject frobnicate"), "--inject 'frobnicate': unknown fault");
  check_refused_before_work(f.run("--trace --impl cpu-emulated --inject tail-page"),
                            "--inject tail-page: planted only in cublaslt-paged, none of which is selected (cpu-emulated)");
  // triage used to print its header first and then exit 2.
  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --fixture --snapshot good.h5").exit_code == 0);
  check_refused_before_work(f.run("triage good.h5 --inject tail-page"),
                            "--inject tail-page: only GPU implementations have this fault, and there is no CUDA device");
}

TEST_CASE("describe exits 1 when lint stops a launch, as --trace would", "[first-contact]") {
  Folder f("describe");
  const Run stopped = f.run("describe --impl cublaslt-paged --inject tail-page --shape 1,1,32,200,64");
  INFO(stopped.out << stopped.err);
  CHECK(stopped.exit_code == 1);
  CHECK(has(stopped.out, "stopped by lint before launch"));
  CHECK(f.run("describe --impl cublaslt-paged --shape 1,1,32,200,64").exit_code == 0);
}

TEST_CASE("the table lists stages as they run, masked -inf apart from Inf, and poison as unwritten", "[first-contact]") {
  CaseSpec spec;
  spec.shape = {1, 2, 200, 200, 64};
  spec.mask = "causal";
  spec.seed = 1;
  const AttentionInputs in = generate_inputs(spec);
  std::unique_ptr<Implementation> impl = make_implementation("cpu-emulated-paged");
  impl->inject("first-page-rescale");
  const CaseResult r = judge_case(*impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), nullptr);
  std::ostringstream table;
  write_case_table(table, r);
  const std::string text = table.str();
  INFO(text);
  REQUIRE(r.divergence);
  CHECK(text.find("rescale[0] ") < text.find("rescale[1..3]"));
  CHECK(text.find("pv[0] ") < text.find("pv[1..3]"));
  // qk: the masked scores (a causal mask over 200 keys in 2 heads) are in "masked", not "Inf".
  const std::vector<std::string> lines = lines_of(text);
  const auto qk = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("  qk[0..3]", 0) == 0; });
  REQUIRE(qk != lines.end());
  std::istringstream row(*qk);
  std::string name;
  long long nan = -1, inf = -1, masked = -1;
  row >> name >> nan >> inf >> masked;
  CHECK(inf == 0);
  CHECK(masked == 2 * (200 * 200 - 200 * 201 / 2));
  // The rescale read poison, and on this CPU the poison survived: it reads as unwritten.
  CHECK(r.divergence->kernel_unwritten);
  CHECK(has(text, "kernel unwritten"));
  CHECK_FALSE(has(r.divergence->evidence, "gave NaN"));
  CHECK(has(r.divergence->evidence, "poison"));
}

TEST_CASE("messages and sentences a new user reads are whole and name no option internals", "[first-contact]") {
  Folder f("messages");
  Run r = f.run("replay missing.h5");
  check_refused_before_work(r, "missing.h5: no such file");
  CHECK_FALSE(has(r.err, "file:"));
  r = f.run("triage missing.npz");
  check_refused_before_work(r, "missing.npz: no such file");
  CHECK_FALSE(has(r.err, "report:"));
  r = f.run("check missing.npz");
  check_refused_before_work(r, "missing.npz: no such file or folder");
  CHECK_FALSE(has(r.err, "files:"));

  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --fixture --snapshot good.h5").exit_code == 0);
  REQUIRE(f.run("reference good.h5 --out ref.h5").exit_code == 0);
  check_refused_before_work(f.run("replay ref.h5"), "ref.h5: this is a reference file (from `flashcore-check reference`), "
                                                    "not a snapshot");

  const Run triage = f.run("triage good.h5");
  CHECK(has(triage.out, "only the CPU implementations ran\n"));

  check_refused_before_work(f.run("triage " + std::string(FC_TEST_DATA_DIR) + "/h100_pv_tail.npz"),
                            "a bug report in PyTorch SDPA form holds q, k, v as [B,H,S,D]; this archive holds acc, out, p, v");
}

TEST_CASE("a divergence that names no element prints no (-1,-1,-1,-) index", "[first-contact]") {
  CaseResult r;
  r.verdict = Verdict::diverged;
  Divergence d;
  d.output = "qk[3]";
  d.kind = "qk";
  d.cause = "layout-mismatch";
  r.divergence = d;
  CHECK(outcome_text(r) == "diverged at qk[3] (layout-mismatch)");
  std::ostringstream pinpoint;
  write_pinpoint(pinpoint, d);
  CHECK_FALSE(has(pinpoint.str(), "-1"));
}

TEST_CASE("no line of --help is longer than 100 characters", "[first-contact]") {
  Folder f("help");
  for (const std::string command :
       {"", "reference", "list", "check", "replay", "diff", "faults", "triage", "fixtures", "describe", "bench",
        "sensitivity", "version"}) {
    const Run r = f.run(command + " --help");
    INFO(command);
    CHECK(r.exit_code == 0);
    std::size_t longest = 0;
    for (const std::string& line : lines_of(r.out)) longest = std::max(longest, line.size());
    CHECK(longest <= 100);
    CHECK(longest > 40);  // the help was there
  }
}

TEST_CASE("fixtures prints a line per fixture, --quiet only the summary", "[first-contact]") {
  Folder f("fixtures");
  fs::create_directories(f.dir / "fx");
  REQUIRE(f.run("--trace --impl cpu-emulated --shape 1,1,16,64 --fixture --snapshot fx/a.h5").exit_code == 0);
  REQUIRE(f.run(kBug + " --fixture --snapshot fx/b.h5").exit_code == 1);
  REQUIRE(f.run("fixtures fx --write-manifest").exit_code == 0);
  const Run all = f.run("fixtures fx");
  INFO(all.out);
  CHECK(all.exit_code == 0);
  const std::vector<std::string> lines = lines_of(all.out);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("a.h5: cpu-emulated, B1 H1 S16 D64 fp16 none normal seed 1: ", 0) == 0);
  CHECK(has(lines[1], "b.h5: cpu-emulated-paged with first-page-rescale"));
  CHECK(has(lines[2], "2 fixtures, "));
  const Run quiet = f.run("fixtures fx --quiet");
  CHECK(lines_of(quiet.out) == std::vector<std::string>{lines[2]});
}

TEST_CASE("a command under --quiet prints only its summary line", "[first-contact]") {
  Folder f("quiet");
  Run r = f.run(kBug + " --seed 1 2 --quiet");
  CHECK(r.exit_code == 1);
  CHECK(lines_of(r.out) == std::vector<std::string>{
                               "2 cases x 1 implementation: 0 pass, 2 diverged, 0 error, 0 skipped; reference self-check passed"});
  r = f.run("faults --fault masked-row-nan --quiet");
  CHECK(r.exit_code == 0);
  CHECK(lines_of(r.out).size() == 1);
  REQUIRE(f.run(kBug + " --snapshot bug.h5").exit_code == 1);
  r = f.run("replay bug.h5 --quiet");
  REQUIRE(lines_of(r.out).size() == 1);
  CHECK(has(r.out, "replay of bug.h5: diverged; recorded: diverged at rescale[0]"));
  r = f.run("triage bug.h5 --quiet");
  CHECK(lines_of(r.out).size() == 1);
}

}  // namespace fc
