// uroce-sim: the fabric experiments of docs/experiments.md as a command (also `uroce sim`). See
// sim/sim_cli.h for the options.
#include "sim/sim_cli.h"

int main(int argc, char** argv) {
  return uroce::simlab::run_sim_cli(argc, argv, "uroce-sim");
}
