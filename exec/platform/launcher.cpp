#include "exec/platform/launcher.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace pipetwin::exec {

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot bind a socket to find a free port");
  }
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

int launch_local(int nproc, const std::vector<std::string>& args, int master_port,
                 std::chrono::seconds grace) {
  return run_local_job(nproc, args, master_port, grace).status;
}

LocalJob run_local_job(int nproc, const std::vector<std::string>& args, int master_port,
                       std::chrono::seconds grace) {
  if (master_port <= 0) master_port = free_local_port();
  std::vector<pid_t> children;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(master_port).c_str(), 1);
      std::vector<char*> argv;
      std::string self = "/proc/self/exe";
      argv.push_back(self.data());
      std::vector<std::string> copy(args);
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::perror("pipetwin: exec");
      std::_Exit(127);
    }
    children.push_back(pid);
  }
  LocalJob job;
  int& status_out = job.status;
  std::vector<bool> killed(children.size(), false);  // by the launcher, after the grace period
  size_t alive = children.size();
  auto deadline = std::chrono::steady_clock::time_point::max();
  std::vector<bool> done(children.size(), false);
  while (alive > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (children[i] != pid) continue;
        done[i] = true;
        --alive;
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (WIFSIGNALED(status) && !killed[i]) job.lost.push_back(static_cast<int>(i));
        if (code != 0 && status_out == 0) {
          status_out = code;
          std::fprintf(stderr, "pipetwin: rank %zu exited with status %d; stopping the job\n", i,
                       code);
          deadline = std::chrono::steady_clock::now() + grace;
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (done[i]) continue;
        killed[i] = true;
        ::kill(children[i], SIGKILL);
      }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::sort(job.lost.begin(), job.lost.end());
  return job;
}

}  // namespace pipetwin::exec
