// The heads' K and V shared by blocks and windows of rows (reference/head_kv_cache.h): the same
// values and id however often a head is judged, widened once while kept, nothing kept past the
// budget or once no take is expected.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "harness/inputs.h"
#include "reference/head_kv_cache.h"

namespace fc {
namespace {

AttentionInputs gqa_inputs() {
  CaseSpec spec;
  spec.shape = {2, 4, 5, 7, 8};
  spec.shape.kv_heads = 2;  // query heads 0, 1 read K/V head 0; 2, 3 read K/V head 1
  spec.seed = 4;
  return generate_inputs(spec);
}

}  // namespace

TEST_CASE("a head's K and V come from the cache as widened, one copy under one id a K/V head", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  const std::size_t one_head = static_cast<std::size_t>(2 * 7 * 8) * sizeof(double);
  HeadKvCache cache(in, HeadKvCache::Keep::for_next_call);
  const HeadKv first = cache.take(1, 2);
  const HeadKv fresh = head_kv(in, 1, 2);
  CHECK(first.b == 1);
  CHECK(first.kv_head == 1);
  CHECK(first.id != 0);
  CHECK(first.id != fresh.id);
  REQUIRE(first.kv);
  CHECK(first.kv->k == fresh.kv->k);
  CHECK(first.kv->v == fresh.kv->v);
  CHECK(cache.kept_bytes() == one_head);

  // Query head 3 reads the same K/V head: the same matrices, not widened again.
  const HeadKv again = cache.take(1, 3);
  CHECK(again.id == first.id);
  CHECK(again.kv == first.kv);
  CHECK(cache.take(1, 0).id != first.id);  // the other K/V head
  CHECK(cache.take(0, 2).id != first.id);  // the other batch
  CHECK(cache.kept_bytes() == 3 * one_head);
}

TEST_CASE("the cache keeps heads within its budget and widens the rest for each take", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  const std::size_t one_head = static_cast<std::size_t>(2 * 7 * 8) * sizeof(double);
  HeadKvCache cache(in, HeadKvCache::Keep::for_next_call, one_head);
  const HeadKv a = cache.take(0, 0), b = cache.take(0, 1);
  CHECK(a.kv == b.kv);
  CHECK(cache.widenings() == 1);
  const HeadKv c = cache.take(0, 2), d = cache.take(0, 3);  // over the budget
  CHECK(cache.widenings() == 3);
  CHECK(c.kv != d.kv);
  CHECK(c.id == d.id);  // a device copy kept under the id is still valid
  CHECK(c.kv->k == d.kv->k);
  CHECK(cache.kept_bytes() == one_head);
  HeadKvCache none(in, HeadKvCache::Keep::for_next_call, 0);
  CHECK(none.take(1, 1).kv != none.take(1, 1).kv);
  CHECK(none.kept_bytes() == 0);
}

TEST_CASE("a cache that keeps K and V while needed keeps them only while a take is expected", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  HeadKvCache cache(in, HeadKvCache::Keep::while_needed);
  cache.expect(0, 0);
  cache.expect(0, 1);  // the same K/V head: two blocks to come
  cache.expect(1, 2);
  const HeadKv a = cache.take(0, 0);
  CHECK(cache.kept_bytes() > 0);
  const HeadKv b = cache.take(0, 1);  // the last expected: shared, and let go by the cache
  CHECK(b.kv == a.kv);
  CHECK(cache.kept_bytes() == 0);
  const HeadKv c = cache.take(0, 0);  // unexpected: widened, nothing kept
  CHECK(c.kv != a.kv);
  CHECK(c.kv->v == a.kv->v);
  CHECK(cache.kept_bytes() == 0);
  const HeadKv other = cache.take(1, 2);  // its only take: widened, nothing kept
  CHECK(cache.kept_bytes() == 0);
  CHECK(other.kv->k.size() == 7 * 8);
}

TEST_CASE("takes of one head at once share one widening", "[reference][kv]") {
  // Heads large enough (2 x 8192 x 128 values a K/V head) that the takes overlap the widening.
  CaseSpec spec;
  spec.shape = {1, 8, 1, 8192, 128};
  spec.shape.kv_heads = 2;
  const AttentionInputs in = generate_inputs(spec);
  HeadKvCache cache(in, HeadKvCache::Keep::for_next_call);
  std::vector<HeadKv> taken(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < taken.size(); ++i) {
    threads.emplace_back([&, i] { taken[i] = cache.take(0, static_cast<std::int64_t>(i % 4)); });  // K/V head 0
  }
  for (std::thread& t : threads) t.join();
  for (const HeadKv& kv : taken) {
    REQUIRE(kv.kv);
    CHECK(kv.kv == taken[0].kv);
  }
  CHECK(cache.widenings() == 1);
  CHECK(cache.kept_bytes() == static_cast<std::size_t>(2 * 8192 * 128) * sizeof(double));
  CHECK(taken[0].kv->k == head_kv(in, 0, 0).kv->k);
}

TEST_CASE("a widening that throws fails its takes and leaves the head to be widened again", "[reference][kv]") {
  AttentionInputs in = gqa_inputs();
  const HostTensor good = in.k;
  in.k = HostTensor(DType::f32, {2, 3});  // not [B,H,S,D]: head_matrix throws
  HeadKvCache cache(in, HeadKvCache::Keep::for_next_call);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      try {
        cache.take(1, 2);
      } catch (const Error&) {
        ++failed;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failed == 4);
  CHECK(cache.kept_bytes() == 0);
  in.k = good;
  const HeadKv kv = cache.take(1, 2);
  REQUIRE(kv.kv);
  CHECK(kv.kv->k == head_kv(in, 1, 2).kv->k);
  CHECK(cache.kept_bytes() > 0);
  CHECK(cache.take(1, 3).kv == kv.kv);
}

TEST_CASE("a head's inputs share their K and V when copied and own them when set", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  HeadInputs a = head_inputs(in, 1, 2);
  const HeadInputs copy = a;
  CHECK(copy.kv() == a.kv());
  CHECK(copy.k().data() == a.k().data());
  HeadInputs moved = std::move(a);
  CHECK(moved.kv() == copy.kv());
  MatrixR other = copy.k();
  other(0, 0) += 1;
  moved.set_kv(other, copy.v());
  CHECK(moved.kv_id == 0);
  CHECK(moved.k()(0, 0) == copy.k()(0, 0) + 1);
  CHECK(moved.k().data() != copy.k().data());
  const HeadInputs empty;
  CHECK(empty.k().size() == 0);
  CHECK(empty.v().size() == 0);
}

}  // namespace fc

namespace fc {

TEST_CASE("a whole head takes its K and V from the cache as it would widen them", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  HeadKvCache cache(in);
  const HeadInputs own = head_inputs(in, 1, 3, BiasForm::mask);
  const HeadInputs cached = head_inputs(in, 1, 3, BiasForm::mask, cache.take(1, 3));
  CHECK(own.kv_id == 0);
  CHECK(cached.kv_id != 0);
  CHECK(cached.q == own.q);
  CHECK(cached.k() == own.k());
  CHECK(cached.v() == own.v());
  CHECK(cached.masked_rows != nullptr);
  std::string message;
  try {
    head_inputs(in, 1, 1, BiasForm::mask, cache.take(1, 3));  // query head 1 reads K/V head 0
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message == "head_inputs: K and V of another head");
}

}  // namespace fc
