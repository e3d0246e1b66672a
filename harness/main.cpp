#include "harness/cli/app.h"

int main(int argc, char** argv) { return fc::run_cli(argc, argv); }
