#pragma once
// Catch2 2.x (Debian 12) and 3.x (Ubuntu 24.04) under one include.
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define FC_CATCH3 1
#else
#include <catch2/catch.hpp>
#endif

#ifdef FC_CATCH3
using Catch::Approx;
#endif
