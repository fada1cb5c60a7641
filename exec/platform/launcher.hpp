// Local launcher: `pipetwin run --nproc N` starts N processes of itself, as torchrun would.
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free
// port unless given) and the parent's arguments without --nproc. The parent waits; when a child
// fails it gives the others a grace period to report their own error and stop, then kills what is
// left, so a dead rank never leaves the job hanging. The exit status is the first failure's.
// A rank that ended by a signal the launcher did not send (SIGKILL from outside, a crash) is
// "lost": `pipetwin train --on-rank-loss continue` restarts the job without it (cmd_train.cpp).
//
// Thread-safety: call from the main thread, once.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pipetwin::exec {

struct LocalJob {
  int status = 0;         // the first failure's exit status (128 + signal for a signal), 0: done
  std::vector<int> lost;  // ranks ended by a signal the launcher did not send
};

// `args`: the command line of each child (argv[0] excluded).
LocalJob run_local_job(int nproc, const std::vector<std::string>& args, int master_port,
                       std::chrono::seconds grace);
// The same, returning the job's exit status.
int launch_local(int nproc, const std::vector<std::string>& args, int master_port,
                 std::chrono::seconds grace);

// A TCP port on 127.0.0.1 that is free right now.
int free_local_port();

}  // namespace pipetwin::exec
