#pragma once
// What an implementation calls after each stage: one capture per declared output, in the
// order of the stage graph. A run without a tap (untraced) skips the calls entirely.
#include <cstddef>

#include "stages/tensor_view.h"

namespace fc {

class Tap {
 public:
  virtual ~Tap() = default;
  virtual void capture(std::size_t stage, std::size_t output, const TensorView& view) = 0;
};

}  // namespace fc
