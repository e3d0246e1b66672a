// Entry point of the CPU tests for Catch2 2.x; Catch2 3.x brings Catch2WithMain.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
