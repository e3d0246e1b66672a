#pragma once
namespace fc {
// Parses the command line and runs the command; returns the exit code.
int run_cli(int argc, char** argv);
}  // namespace fc
