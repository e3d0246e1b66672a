// The GPU evaluators' K/V copies by id (reference/gpu/device_kv_cache.h), without a device: the
// copies are empty device matrices, the uploads counted. Blocks that ask for one head at once
// share one upload; past the budget, or without an id, each block has its own; an upload that
// throws fails the blocks waiting on it, and a later one uploads again.
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "catch.h"
#include "reference/gpu/device_kv_cache.h"

namespace fc::gpu {
namespace {

// An upload that takes a while (so that concurrent gets overlap it) and counts itself.
struct Uploads {
  std::atomic<int> count{0}, shared{0};
  bool fail = false;
  DeviceKv operator()(bool is_shared) {
    ++count;
    if (is_shared) ++shared;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    if (fail) throw std::runtime_error("upload failed");
    return {std::make_shared<const DeviceMatrix>(), std::make_shared<const DeviceMatrix>()};
  }
};

std::vector<DeviceKv> get_at_once(DeviceKvCache& cache, std::uint64_t id, std::size_t bytes, Uploads& uploads,
                                  int threads, int* failures = nullptr) {
  std::vector<DeviceKv> got(static_cast<std::size_t>(threads));
  std::atomic<int> failed{0}, started{0};
  std::vector<std::thread> running;
  for (int i = 0; i < threads; ++i) {
    running.emplace_back([&, i] {
      ++started;
      while (started < threads) std::this_thread::yield();  // all ask within the upload's 150 ms
      try {
        got[static_cast<std::size_t>(i)] = cache.get(id, bytes, [&](bool s) { return uploads(s); });
      } catch (const std::runtime_error&) {
        ++failed;
      }
    });
  }
  for (std::thread& t : running) t.join();
  if (failures) *failures = failed.load();
  return got;
}

}  // namespace

TEST_CASE("blocks that ask for a head's device K/V at once share one upload", "[reference][kv]") {
  DeviceKvCache cache(1000);
  Uploads uploads;
  const std::vector<DeviceKv> got = get_at_once(cache, 7, 100, uploads, 8);
  CHECK(uploads.count == 1);
  CHECK(uploads.shared == 1);
  for (const DeviceKv& kv : got) {
    REQUIRE(kv.first);
    CHECK(kv.first == got[0].first);
    CHECK(kv.second == got[0].second);
  }
  // Later blocks find it kept; another head is uploaded for itself.
  CHECK(cache.get(7, 100, [&](bool s) { return uploads(s); }).first == got[0].first);
  CHECK(uploads.count == 1);
  cache.get(8, 100, [&](bool s) { return uploads(s); });
  CHECK(uploads.count == 2);
}

TEST_CASE("past the device K/V budget, or without an id, each block uploads its own", "[reference][kv]") {
  DeviceKvCache cache(150);
  Uploads uploads;
  cache.get(1, 100, [&](bool s) { return uploads(s); });
  const std::vector<DeviceKv> over = get_at_once(cache, 2, 100, uploads, 3);  // 200 > 150
  CHECK(uploads.count == 4);
  CHECK(uploads.shared == 1);
  CHECK(over[0].first != over[1].first);
  const std::vector<DeviceKv> own = get_at_once(cache, 0, 10, uploads, 2);
  CHECK(uploads.count == 6);
  CHECK(uploads.shared == 1);
  CHECK(own[0].first != own[1].first);
  cache.clear();
  cache.get(2, 100, [&](bool s) { return uploads(s); });  // room again
  CHECK(uploads.shared == 2);
}

TEST_CASE("a device K/V upload that throws fails the blocks waiting on it, and a later block uploads again",
          "[reference][kv]") {
  DeviceKvCache cache(1000);
  Uploads uploads;
  uploads.fail = true;
  int failures = 0;
  get_at_once(cache, 3, 100, uploads, 4, &failures);
  CHECK(failures == 4);
  CHECK(uploads.count == 1);
  uploads.fail = false;
  const DeviceKv kv = cache.get(3, 100, [&](bool s) { return uploads(s); });
  CHECK(uploads.count == 2);
  CHECK(kv.first);
  CHECK(cache.get(3, 100, [&](bool s) { return uploads(s); }).first == kv.first);  // kept this time
  CHECK(uploads.count == 2);
}

}  // namespace fc::gpu
