// The fault catalog against the implementations that carry the faults, and the detection
// matrix on the CPU implementations (the GPU ones are in tests/gpu/test_faults_gpu.cpp).
#include <algorithm>
#include <set>
#include <sstream>

#include "catch.h"
#include "harness/faults/isolated_run.h"
#include "harness/faults/matrix.h"
#include "harness/faults/matrix_table.h"
#include "kernels/implementation.h"
#include "support/matrix_checks.h"

namespace fc {

TEST_CASE("every implementation's faults are in the catalog and the catalog names them back", "[faults]") {
  std::set<std::pair<std::string, std::string>> from_impls, from_catalog;
  for (const auto& impl : make_implementations()) {
    for (const std::string& f : impl->faults()) from_impls.insert({f, impl->name()});
  }
  for (const FaultSpec& f : fault_catalog()) {
    for (const std::string& impl : f.impls) from_catalog.insert({f.id, impl});
  }
  CHECK(from_impls == from_catalog);
  CHECK(fault_catalog().size() >= 12);
}

TEST_CASE("an unknown fault is refused by an implementation", "[faults]") {
  std::unique_ptr<Implementation> impl = make_implementation("cpu-emulated");
  CHECK_THROWS_AS(impl->inject("first-page-rescale"), Error);
  impl->inject("masked-row-nan");
  CHECK(impl->injected() == "masked-row-nan");
  impl->inject("");
  CHECK(impl->injected().empty());
}

TEST_CASE("the CPU fault matrix finds every fault at its stage, element and cause, without false alarms",
          "[faults]") {
  CHECK(test::check_fault_matrix(false) >= 7);
}

TEST_CASE("a sweep of clean random cases through the CPU implementations raises no alarm", "[faults]") {
  test::check_clean_sweep(60, false);
}

TEST_CASE("the faults table sizes each column to its longest entry", "[faults]") {
  // A production output's name is long; "expected" and "found" once had fixed widths it overran.
  const auto cell = [](const std::string& fault, const std::string& impl, const std::string& output,
                       const std::string& cause) {
    MatrixCell c;
    c.fault = fault;
    c.impl = impl;
    c.expected.output = output;
    c.expected.index = Index4{0, 0, 0, 0};
    c.expected.cause = cause;
    c.clean.verdict = Verdict::pass;
    c.faulty.verdict = Verdict::diverged;
    Divergence d;
    d.output = output;
    d.index = Index4{0, 0, 0, 0};
    d.cause = cause;
    c.faulty.divergence = d;
    c.stage_ok = c.index_ok = c.cause_ok = true;
    return c;
  };
  const std::vector<MatrixCell> cells = {
      cell("masked-row-nan", "cpu-emulated", "softmax", "fully-masked-row"),
      cell("production-only-drop", "wmma-fused", "normalize (production)", "trace-build-mismatch")};
  std::ostringstream out;
  write_matrix_table(out, cells, false);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 3);
  INFO(out.str());
  // Every column starts where its header does, two spaces after the widest entry before it.
  for (const char* header : {"implementation", "expected", "found", "clean", "result"}) {
    const std::size_t at = lines[0].find(header);
    REQUIRE(at != std::string::npos);
    for (const std::string& line : lines) {
      CHECK(line.substr(at - 2, 2) == "  ");
      CHECK(line[at] != ' ');
    }
  }
  CHECK(lines[2].find("normalize (production) (0,0,0,0) trace-build-mismatch  normalize (production) (0,0,0,0) "
                      "trace-build-mismatch  pass   ok") != std::string::npos);
}

}  // namespace fc

namespace fc {

TEST_CASE("an isolated fault's child is given its trigger case as command-line arguments", "[faults]") {
  CaseSpec spec;
  spec.shape = parse_shape("2,8:2,200,300,64");
  spec.mask = "causal-br+softcap=20";
  spec.dtype = DType::bf16;
  spec.dist = "outlier";
  spec.seed = 42;
  spec.scale = 0.1;
  const std::vector<std::string> args = case_arguments(spec);
  const auto after = [&](const std::string& option) {
    const auto it = std::find(args.begin(), args.end(), option);
    REQUIRE(it != args.end());
    REQUIRE(it + 1 != args.end());
    return *(it + 1);
  };
  const Shape shape = parse_shape(after("--shape"));
  CHECK(shape.batch == 2);
  CHECK(shape.heads == 8);
  CHECK(shape.kv_head_count() == 2);
  CHECK(shape.q_len == 200);
  CHECK(shape.kv_len == 300);
  CHECK(shape.head_dim == 64);
  CHECK(after("--mask") == spec.mask);
  CHECK(after("--dtype") == "bf16");
  CHECK(after("--dist") == "outlier");
  CHECK(after("--seed") == "42");
  CHECK(std::stod(after("--scale")) == 0.1);
  // Every race fault of a GPU pipeline runs isolated: it may hang or trap the device.
  for (const char* id : {"missing-sync", "missing-mbarrier-wait", "mbarrier-wrong-phase"}) {
    INFO(id);
    REQUIRE(find_fault(id));
    CHECK(find_fault(id)->isolated);
  }
}

}  // namespace fc
