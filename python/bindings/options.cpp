#include "python/bindings/options.hpp"

#include <limits>

#include <fmt/format.h>

#include "studies/plan_options.hpp"

namespace pipetwin::python {

namespace {

std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>();
}

bool is_int(py::handle value) {
  return py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value);
}

}  // namespace

std::string path_text(py::handle value, const std::string& what) {
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::hasattr(value, "__fspath__")) {
    const py::object path = py::module_::import("os").attr("fspath")(value);
    if (py::isinstance<py::str>(path)) return path.cast<std::string>();
  }
  throw py::type_error(
      fmt::format("{} must be a path (str or os.PathLike), not {}", what, type_name(value)));
}

Options::Options(std::string verb, const py::kwargs& kwargs)
    : verb_(std::move(verb)), kwargs_(py::dict(kwargs)) {}

bool Options::has(const char* name) const {
  return kwargs_.contains(name) && !kwargs_[name].is_none();
}

py::object Options::take(const char* name) {
  if (!kwargs_.contains(name)) return py::none();
  py::object value = kwargs_[name];
  PyDict_DelItemString(kwargs_.ptr(), name);
  return value;
}

void Options::wrong_type(const char* name, const char* expected, py::handle value) const {
  throw py::type_error(
      fmt::format("{}(): {} must be {}, not {}", verb_, name, expected, type_name(value)));
}

void Options::text(const char* name, std::string& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (!py::isinstance<py::str>(v)) wrong_type(name, "a str", v);
  out = v.cast<std::string>();
}

void Options::path(const char* name, std::string& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (!py::isinstance<py::str>(v) && !py::hasattr(v, "__fspath__")) {
    wrong_type(name, "a path (str or os.PathLike)", v);
  }
  out = path_text(v, fmt::format("{}(): {}", verb_, name));
}

void Options::integer(const char* name, int& out) {
  long wide = out;
  integer(name, wide);
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    throw py::value_error(fmt::format("{}(): {} is out of range ({})", verb_, name, wide));
  }
  out = static_cast<int>(wide);
}

void Options::integer(const char* name, long& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (!is_int(v)) wrong_type(name, "an int", v);
  out = v.cast<long>();
}

void Options::integer(const char* name, uint64_t& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (!is_int(v) || v.cast<py::int_>() < py::int_(0)) wrong_type(name, "a non-negative int", v);
  out = v.cast<uint64_t>();
}

void Options::real(const char* name, double& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (!is_int(v) && !py::isinstance<py::float_>(v)) wrong_type(name, "a number", v);
  out = v.cast<double>();
}

void Options::flag(const char* name, bool& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (!py::isinstance<py::bool_>(v)) wrong_type(name, "a bool", v);
  out = v.cast<bool>();
}

void Options::count_or_auto(const char* name, std::string& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (is_int(v)) {
    out = std::to_string(v.cast<long long>());
  } else if (py::isinstance<py::str>(v)) {
    out = v.cast<std::string>();
  } else {
    wrong_type(name, "an int or \"auto\"", v);
  }
}

void Options::words(const char* name, std::vector<std::string>& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  if (py::isinstance<py::str>(v)) {
    out = sim::split_commas(v.cast<std::string>());
    return;
  }
  if (!py::isinstance<py::sequence>(v)) wrong_type(name, "a str or a list of str", v);
  out.clear();
  for (const auto item : v.cast<py::sequence>()) {
    if (!py::isinstance<py::str>(item)) wrong_type(name, "a list of str", item);
    out.push_back(item.cast<std::string>());
  }
}

void Options::integers(const char* name, std::vector<int>& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  out.clear();
  if (is_int(v)) {
    out.push_back(v.cast<int>());
    return;
  }
  if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v)) {
    wrong_type(name, "an int or a list of int", v);
  }
  for (const auto item : v.cast<py::sequence>()) {
    if (!is_int(item)) wrong_type(name, "a list of int", item);
    out.push_back(item.cast<int>());
  }
}

void Options::paths(const char* name, std::vector<std::string>& out) {
  const py::object v = take(name);
  if (v.is_none()) return;
  out.clear();
  if (py::isinstance<py::str>(v) || py::hasattr(v, "__fspath__")) {
    out.push_back(path_text(v, fmt::format("{}(): {}", verb_, name)));
    return;
  }
  if (!py::isinstance<py::sequence>(v)) wrong_type(name, "a path or a list of paths", v);
  for (const auto item : v.cast<py::sequence>()) {
    out.push_back(path_text(item, fmt::format("{}(): {}", verb_, name)));
  }
}

py::object Options::object(const char* name) {
  return take(name);
}

void Options::finish() const {
  for (const auto item : kwargs_) {
    throw py::type_error(fmt::format("{}() got an unexpected keyword argument '{}'", verb_,
                                     item.first.cast<std::string>()));
  }
}

}  // namespace pipetwin::python
