#include "exec/runtime/fault.hpp"

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::exec {

namespace {

Fault::Mode parse_mode(const std::string& m, const std::string& text) {
  if (m == "throw") return Fault::Mode::kThrow;
  if (m == "exit") return Fault::Mode::kExit;
  if (m == "kill") return Fault::Mode::kKill;
  if (m == "hang") return Fault::Mode::kHang;
  if (m == "diskfull") return Fault::Mode::kDiskFull;
  throw InputError(fmt::format(
      "environment variable PIPETWIN_FAULT: mode \"{}\" in \"{}\": expected throw, exit, kill, "
      "hang or diskfull",
      m, text));
}

int64_t parse_number(const std::string& key, const std::string& v, const std::string& text) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || x < 0) {
    throw InputError(fmt::format(
        "environment variable PIPETWIN_FAULT: {}=\"{}\" in \"{}\": expected a non-negative "
        "integer",
        key, v, text));
  }
  return x;
}

}  // namespace

Fault Fault::from_environment() {
  const char* env = std::getenv("PIPETWIN_FAULT");
  if (env == nullptr || *env == 0) return {};
  return parse(env);
}

Fault Fault::parse(const std::string& text) {
  Fault f;
  f.text_ = text;
  std::string rest = text;
  const size_t at = text.find('@');
  if (at != std::string::npos) {
    f.mode_ = parse_mode(text.substr(0, at), text);
    rest = text.substr(at + 1);
  }
  size_t pos = 0;
  int64_t restart = -1;
  while (pos <= rest.size() && !rest.empty()) {
    const size_t comma = rest.find(',', pos);
    const std::string item = rest.substr(pos, comma == std::string::npos ? comma : comma - pos);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw InputError(fmt::format(
          "environment variable PIPETWIN_FAULT: \"{}\" in \"{}\": expected KEY=VALUE", item, text));
    }
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "mode") {
      f.mode_ = parse_mode(v, text);
    } else if (k == "step") {
      f.step_ = parse_number(k, v, text);
    } else if (k == "checkpoint") {
      f.checkpoint_ = parse_number(k, v, text);
    } else if (k == "transition") {
      f.transition_ = parse_number(k, v, text);
    } else if (k == "rank") {
      f.rank_ = static_cast<int>(parse_number(k, v, text));
    } else if (k == "restart") {
      restart = parse_number(k, v, text);
    } else if (k == "device") {
      f.device_ = static_cast<int>(parse_number(k, v, text));
    } else if (k == "action") {
      f.action_ = static_cast<int>(parse_number(k, v, text));
    } else {
      throw InputError(
          fmt::format("environment variable PIPETWIN_FAULT: key \"{}\" in \"{}\": expected step, "
                      "checkpoint, transition, rank, restart, device, action or mode",
                      k, text));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (f.mode_ == Mode::kNone) {
    throw InputError(fmt::format(
        "environment variable PIPETWIN_FAULT: \"{}\": no mode (write MODE@KEY=V,...)", text));
  }
  if (f.step_ < 0 && f.checkpoint_ < 0 && f.transition_ < 0 && f.action_ < 0) {
    throw InputError(fmt::format(
        "environment variable PIPETWIN_FAULT: \"{}\": say where (step=, checkpoint=, transition= "
        "or action=)",
        text));
  }
  // restart=N: only in the job the launcher started after N restarts (--on-rank-loss continue
  // sets PIPETWIN_RESTART_COUNT), so a fault that cost a rank does not fire again after it.
  const char* count = std::getenv("PIPETWIN_RESTART_COUNT");
  if (restart >= 0 && restart != (count && *count ? std::atoll(count) : 0)) f.mode_ = Mode::kNone;
  return f;
}

void Fault::fire() const {
  switch (mode_) {
    case Mode::kExit:
      std::_Exit(3);
    case Mode::kKill:
      ::raise(SIGKILL);
      std::_Exit(137);  // not reached
    case Mode::kHang:
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    default:
      throw std::runtime_error(fmt::format("injected fault (PIPETWIN_FAULT={})", text_));
  }
}

void Fault::at_action(int rank, int device, int index, int64_t step, bool compute) const {
  if (!armed() || mode_ == Mode::kDiskFull || !on_rank(rank)) return;
  if (device_ >= 0 && device_ != device) return;
  if (action_ >= 0) {
    if (action_ == index) fire();
    return;
  }
  if (step_ >= 0 && compute && step == step_) fire();
}

void Fault::at_checkpoint(int rank, int64_t step) const {
  if (!armed() || mode_ == Mode::kDiskFull || !on_rank(rank)) return;
  if (checkpoint_ >= 0 && checkpoint_ == step) fire();
}

void Fault::at_transition(int rank, int64_t step) const {
  if (!armed() || mode_ == Mode::kDiskFull || !on_rank(rank)) return;
  if (transition_ >= 0 && transition_ == step) fire();
}

bool Fault::disk_full(int rank, int64_t step) const {
  return mode_ == Mode::kDiskFull && on_rank(rank) && checkpoint_ == step;
}

FileSizeLimit::FileSizeLimit(uint64_t bytes) {
  rlimit r{};
  if (::getrlimit(RLIMIT_FSIZE, &r) != 0) return;
  old_soft_ = r.rlim_cur;
  r.rlim_cur = std::min<rlim_t>(bytes, r.rlim_max);
  old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
  active_ = ::setrlimit(RLIMIT_FSIZE, &r) == 0;
}

FileSizeLimit::~FileSizeLimit() {
  if (active_) {
    rlimit r{};
    ::getrlimit(RLIMIT_FSIZE, &r);
    r.rlim_cur = old_soft_;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ::signal(SIGXFSZ, old_handler_);
}

}  // namespace pipetwin::exec
