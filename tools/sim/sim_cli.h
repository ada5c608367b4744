#pragma once
// The fabric experiments of docs/experiments.md as a command line, shared by `uroce sim` and the
// standalone `uroce-sim`:
//
//   incast|victim|parking-lot|convergence|loss [--mode pfc|pfc+dcqcn|dcqcn-nopfc]
//       [--dcqcn paper|mlx5] [--seed N] [--senders N] [--flows N] [--bytes B] [--loss P]
//       [--stagger-us T] [--mtu B] [--out DIR]
//   topology 'TEXT' | '{JSON}' | @FILE     parse, build and describe a topology
//
// Prints the parameters and results as key=value lines and writes DIR/<experiment>-<mode>.csv and
// .svg (default DIR: the current directory).

namespace uroce::simlab {

// argv[0] is the command's own name (ignored), argv[1] the experiment. `prog` names the command
// in the usage line. Returns the exit status: 0 ok, 1 the run failed or data did not verify,
// 2 usage.
int run_sim_cli(int argc, char** argv, const char* prog);

}  // namespace uroce::simlab
