// Keyword arguments of the Python API bound to C++ fields by name, as the CLI binds its flags.
//
// Every verb of `import pipetwin` takes the CLI's long flags as keyword arguments, dashes as
// underscores (`--checkpoint-mode` is `checkpoint_mode=`, `-K,--stages` is `stages=`). A verb
// reads its keywords through one Options: each bind call takes the keyword of that name, if
// given and not None, into the field, whose value otherwise stays the C++ default (the same
// default the CLI's --help shows). finish() then refuses whatever keyword no bind took, as Python
// does for an unknown keyword argument. A value of the wrong Python type is a TypeError naming the
// verb and the keyword; a value of the right type that the CLI would refuse goes on to the same
// C++ check and so raises the CLI's one-line InputError.
//
// Thread-safety: touches Python objects; call with the GIL held.
#pragma once

#include <string>
#include <vector>

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

// The path a Python value names: a str, or an os.PathLike (pathlib.Path).
std::string path_text(py::handle value, const std::string& what);

// `call()` run with the GIL released: a verb's work, which touches no Python object; its result.
template <class Call>
auto without_gil(Call&& call) {
  py::gil_scoped_release release;
  return call();
}

class Options {
 public:
  // `verb` names the function in TypeErrors ("plan", "simulate").
  Options(std::string verb, const py::kwargs& kwargs);

  bool has(const char* name) const;  // given and not None
  // str (a word, a spec, a name).
  void text(const char* name, std::string& out);
  // str or os.PathLike.
  void path(const char* name, std::string& out);
  // int (bool refused: True is no stage count).
  void integer(const char* name, int& out);
  void integer(const char* name, long& out);  // int64_t on Linux
  void integer(const char* name, uint64_t& out);
  // int or float.
  void real(const char* name, double& out);
  // bool.
  void flag(const char* name, bool& out);
  // A count or "auto" (-M, --virtual-stages): an int, or a str the CLI parses.
  void count_or_auto(const char* name, std::string& out);
  // A list: a sequence of str, or one str split at commas (as the CLI's delimiter ',').
  void words(const char* name, std::vector<std::string>& out);
  // A list of ints: a sequence of int, or one int.
  void integers(const char* name, std::vector<int>& out);
  // One path or a sequence of them (str or os.PathLike each).
  void paths(const char* name, std::vector<std::string>& out);
  // The raw object (None when not given), for values of several kinds (a Plan or a path).
  py::object object(const char* name);

  // TypeError "<verb>() got an unexpected keyword argument '<name>'" for the first keyword no
  // bind call took.
  void finish() const;

 private:
  py::object take(const char* name);  // the value, or None; marks the keyword as taken
  [[noreturn]] void wrong_type(const char* name, const char* expected, py::handle value) const;

  std::string verb_;
  py::dict kwargs_;  // what is left
};

}  // namespace pipetwin::python
