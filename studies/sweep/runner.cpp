#include "studies/sweep/runner.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::sim {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// An append-only file descriptor: whole lines per write(), fdatasync on demand.
class Appender {
 public:
  explicit Appender(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw InputError(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
  }
  ~Appender() {
    if (fd_ >= 0) ::close(fd_);
  }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;

  void append(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw std::runtime_error(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
      done += static_cast<size_t>(n);
    }
    dirty_ = dirty_ || !text.empty();
  }
  void sync() {
    if (dirty_ && ::fdatasync(fd_) != 0 && errno != EINVAL) {
      throw std::runtime_error(
          fmt::format("{}: fdatasync failed: {}", path_, std::strerror(errno)));
    }
    dirty_ = false;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool dirty_ = false;
};

struct Resume {
  int64_t rows = 0;
  bool repaired = false;
};

void check_header(const CsvRow& have, const CsvRow& want, const std::string& path) {
  for (size_t i = 0; i < std::max(have.size(), want.size()); ++i) {
    const std::string h = i < have.size() ? have[i] : "(none)";
    const std::string w = i < want.size() ? want[i] : "(none)";
    if (h != w) {
      throw InputError(fmt::format(
          "{}: header does not match this sweep's grid: column {} is \"{}\", the grid makes \"{}\" "
          "(write to another file or delete this one)",
          path, i + 1, h, w));
    }
  }
}

// The row of shard point k must carry the inputs of grid point shard + k x shards.
void check_row(const Sweep& sweep, const CsvRow& row, int64_t index, size_t line,
               const std::string& path) {
  const CsvRow want = sweep.inputs_row(index);
  const CsvRow header = sweep.header();
  for (size_t i = 0; i < want.size(); ++i) {
    if (row[i] != want[i]) {
      throw InputError(
          fmt::format("{}: line {}: {} is \"{}\", point {} of this sweep has \"{}\" (the file "
                      "belongs to another "
                      "sweep or shard; write to another file or delete it)",
                      path, line, header[i], row[i], index, want[i]));
    }
  }
}

// Reads back an existing output, verifies it and cuts off a torn last record.
Resume read_back(const Sweep& sweep, const RunOptions& o, int64_t total) {
  Resume r;
  namespace fs = std::filesystem;
  if (!fs::exists(o.output) || fs::file_size(o.output) == 0) return r;
  const CsvText text = read_csv(o.output);
  size_t keep = text.complete_bytes;
  r.repaired = text.torn_tail;
  if (!text.header.empty()) check_header(text.header, sweep.header(), o.output);
  for (size_t k = 0; k < text.rows.size(); ++k) {
    if (text.rows[k].size() != text.header.size()) {
      if (k + 1 < text.rows.size() || text.torn_tail) {
        throw InputError(fmt::format("{}: line {}: damaged row ({} fields, {} expected)", o.output,
                                     k + 2, text.rows[k].size(), text.header.size()));
      }
      keep = k == 0 ? text.header_end : text.row_end[k - 1];  // a torn last record
      r.repaired = true;
      break;
    }
    if (static_cast<int64_t>(k) >= total) {
      throw InputError(fmt::format("{}: {} rows, but this shard has {} points (another sweep?)",
                                   o.output, text.rows.size(), total));
    }
    check_row(sweep, text.rows[k], o.shard + static_cast<int64_t>(k) * o.shards, k + 2, o.output);
    ++r.rows;
  }
  if (r.repaired) fs::resize_file(o.output, keep);
  return r;
}

struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, std::string> finished;  // shard point k -> its CSV line
  std::exception_ptr error;
  std::atomic<int64_t> next{0};
  std::atomic<bool> halt{false};
  int active = 0;
};

void worker(const Sweep& sweep, const RunOptions& o, int64_t end, Pool& pool) {
  try {
    while (!pool.halt.load() && !(o.stop && o.stop->load())) {
      const int64_t k = pool.next.fetch_add(1);
      if (k >= end) break;
      std::string line = csv_line(sweep.row(o.shard + k * o.shards));
      std::lock_guard<std::mutex> lock(pool.mu);
      pool.finished.emplace(k, std::move(line));
      if (o.point_done) o.point_done();
      pool.cv.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.error) pool.error = std::current_exception();
    pool.halt = true;
  }
  std::lock_guard<std::mutex> lock(pool.mu);
  --pool.active;
  pool.cv.notify_all();
}

}  // namespace

std::pair<int, int> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  int i = -1, n = 0;
  auto parse = [](std::string_view s, int& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  if (slash == std::string::npos || !parse(std::string_view(text).substr(0, slash), i) ||
      !parse(std::string_view(text).substr(slash + 1), n)) {
    throw InputError(fmt::format("--shard: expected i/n (e.g. 0/4), got \"{}\"", text));
  }
  if (n < 1) throw InputError(fmt::format("--shard: shard count must be positive ({} given)", n));
  if (i < 0 || i >= n) {
    throw InputError(
        fmt::format("--shard: index {} is out of range 0..{} for {} shards", i, n - 1, n));
  }
  return {i, n};
}

void keep_freed_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest on 64-bit
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  });
}

namespace {

// The calling thread's part: appends finished rows in shard order until every worker is done,
// syncing and reporting progress as it goes. Returns the rows of the file.
int64_t write_in_order(Pool& pool, Appender& out, const RunOptions& o, const RunResult& result) {
  const auto start = Clock::now();
  auto last_sync = start, last_progress = start;
  int64_t written = result.resumed;
  auto report = [&] {
    if (!o.progress) return;
    const double t = seconds_since(start);
    o.progress({result.total, result.resumed, written, t,
                t > 0 ? static_cast<double>(written - result.resumed) / t : 0});
  };
  report();
  bool running = true;
  while (running) {
    std::string batch;
    {
      std::unique_lock<std::mutex> lock(pool.mu);
      pool.cv.wait_for(lock, std::chrono::duration<double>(o.progress_interval_s));
      for (auto it = pool.finished.begin(); it != pool.finished.end() && it->first == written;) {
        batch += it->second;
        ++written;
        it = pool.finished.erase(it);
      }
      running = pool.active > 0;
    }
    out.append(batch);
    if (seconds_since(last_sync) >= o.sync_interval_s) {
      out.sync();
      last_sync = Clock::now();
    }
    if (seconds_since(last_progress) >= o.progress_interval_s || !running) {
      report();
      last_progress = Clock::now();
    }
  }
  return written;
}

}  // namespace

RunResult run_sweep(const Sweep& sweep, const RunOptions& o) {
  keep_freed_memory();
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw InputError(fmt::format("--shard: {}/{} is not a shard", o.shard, o.shards));
  }
  RunResult result;
  result.total = (sweep.size() - o.shard + o.shards - 1) / o.shards;
  const Resume resume = read_back(sweep, o, result.total);
  result.resumed = resume.rows;
  result.repaired = resume.repaired;
  Appender out(o.output);
  if (std::filesystem::file_size(o.output) == 0) out.append(csv_line(sweep.header()));
  int64_t end = result.total;
  if (o.limit >= 0) end = std::min(end, result.resumed + o.limit);
  Pool pool;
  pool.next = result.resumed;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t jobs =
      std::min<int64_t>(o.jobs > 0 ? o.jobs : hw, std::max<int64_t>(1, end - result.resumed));
  std::vector<std::thread> threads;
  pool.active = static_cast<int>(jobs);
  for (int64_t j = 0; j < jobs; ++j)
    threads.emplace_back(worker, std::cref(sweep), std::cref(o), end, std::ref(pool));
  int64_t written = result.resumed;
  try {
    written = write_in_order(pool, out, o, result);
  } catch (...) {
    pool.halt = true;  // a write failed: stop the workers before unwinding
    for (auto& t : threads) t.join();
    throw;
  }
  for (auto& t : threads) t.join();
  out.sync();
  if (pool.error) std::rethrow_exception(pool.error);
  result.computed = written - result.resumed;
  result.complete = written == result.total;
  return result;
}

}  // namespace pipetwin::sim
