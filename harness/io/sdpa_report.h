#pragma once
// A bug report in PyTorch SDPA form, read from a .npz:
//   q [B,H,Sq,D], k and v [B,H,Sk,D]: float16, float32, or bfloat16 stored as uint16 with a
//     string entry `dtype` = "bfloat16";
//   attn_mask (optional): bool (True = attend) or float (added to the scores), any shape
//     that broadcasts to [B,H,Sq,Sk] (rank 2 to 4);
//   scale (optional, 0-d float), is_causal (optional, 0-d bool; top-left, as PyTorch).
// Every problem is one fc::Error line naming the file and the array.
#include <string>

#include "core/problem.h"

namespace fc {

AttentionInputs read_sdpa_report(const std::string& path);

}  // namespace fc
