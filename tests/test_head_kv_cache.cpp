// The heads' K and V kept between blocks and windows of rows (reference/head_kv_cache.h): the
// same values and id however often a head is judged, widened again only while another block
// holds them, nothing kept past the budget or from elsewhere.
#include <string>

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

TEST_CASE("a head's K and V come back from the cache as widened, under one id a K/V head", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  HeadKvCache cache(in, HeadKvCache::Keep::for_next_call);
  HeadKv first = cache.take(1, 2);
  const HeadKv fresh = head_kv(in, 1, 2);
  CHECK(first.b == 1);
  CHECK(first.kv_head == 1);
  CHECK(first.id != 0);
  CHECK(first.k == fresh.k);
  CHECK(first.v == fresh.v);
  CHECK(first.id != fresh.id);

  // Taken again while out: widened again, the same id (a device copy kept under it is valid).
  const HeadKv again = cache.take(1, 3);
  CHECK(again.id == first.id);
  CHECK(again.k == fresh.k);
  CHECK(cache.take(1, 0).id != first.id);  // the other K/V head
  CHECK(cache.take(0, 2).id != first.id);  // the other batch

  // Given back, the next take is the same matrices, not widened again.
  const double* stored = first.k.data();
  const std::uint64_t id = first.id;
  cache.give_back(std::move(first));
  CHECK(cache.kept_bytes() == static_cast<std::size_t>(2 * 7 * 8) * sizeof(double));
  HeadKv kept = cache.take(1, 2);
  CHECK(kept.k.data() == stored);
  CHECK(kept.id == id);
  CHECK(kept.v == fresh.v);
  CHECK(cache.kept_bytes() == 0);
}

TEST_CASE("the cache keeps one copy a head, within its budget, and none of another's", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  const std::size_t one_head = static_cast<std::size_t>(2 * 7 * 8) * sizeof(double);
  HeadKvCache cache(in, HeadKvCache::Keep::for_next_call, one_head);
  HeadKv a = cache.take(0, 0), b = cache.take(0, 1), c = cache.take(0, 2);
  cache.give_back(std::move(a));
  cache.give_back(std::move(b));  // the same head kept already
  CHECK(cache.kept_bytes() == one_head);
  cache.give_back(std::move(c));  // over the budget
  CHECK(cache.kept_bytes() == one_head);
  HeadKv other = cache.take(0, 0);
  cache.give_back(head_kv(in, 0, 2));  // an id not the cache's: not kept
  CHECK(cache.kept_bytes() == 0);
  HeadKvCache none(in, HeadKvCache::Keep::for_next_call, 0);
  none.give_back(none.take(1, 1));
  CHECK(none.kept_bytes() == 0);
  CHECK(other.k.size() == 7 * 8);
}

TEST_CASE("a cache that keeps K and V while needed keeps them only while a take is expected", "[reference][kv]") {
  const AttentionInputs in = gqa_inputs();
  HeadKvCache cache(in, HeadKvCache::Keep::while_needed);
  cache.expect(0, 0);
  cache.expect(0, 1);  // the same K/V head: two blocks to come
  HeadKv a = cache.take(0, 0), b = cache.take(0, 1);  // both running at once: none expected now
  cache.give_back(std::move(a));
  CHECK(cache.kept_bytes() == 0);
  // One more block: kept for it; given back after it, and the copy kept is let go as well.
  cache.expect(0, 0);
  cache.give_back(std::move(b));
  CHECK(cache.kept_bytes() > 0);
  HeadKv c = cache.take(0, 0);
  CHECK(cache.kept_bytes() == 0);
  cache.expect(1, 2);
  HeadKv other = cache.take(1, 2);
  cache.expect(0, 0);
  cache.give_back(std::move(c));
  CHECK(cache.kept_bytes() > 0);
  cache.take(0, 0);
  cache.give_back(head_kv(in, 0, 0, 0));  // not the cache's: changes nothing
  HeadKv again = cache.take(0, 0);  // unexpected: widened, nothing kept to take
  cache.give_back(std::move(again));  // none expected: nothing kept
  CHECK(cache.kept_bytes() == 0);
  CHECK(other.k.size() == 7 * 8);
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
  CHECK(cached.k == own.k);
  CHECK(cached.v == own.v);
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
