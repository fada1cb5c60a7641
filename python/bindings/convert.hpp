// pipetwin's JSON documents as Python values, and back: what crosses between the C++ library and
// `import pipetwin`.
//
// A document the CLI writes to a file (metrics, a plan, a profile, an elastic report) reaches
// Python as the dict json.load would read from that file: objects become dicts in the file's
// member order, arrays lists, numbers int or float with the same bits as the C++ double (so a
// value equals the CLI's to the last bit), null None. Rows of a table become a list of dicts of
// one shape, which the package's Python layer turns into a pandas DataFrame.
//
// Thread-safety: touches Python objects; call with the GIL held.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

#include "core/json_io.hpp"

namespace pipetwin::python {

namespace py = pybind11;

py::object to_python(const Json& value);

// A Python document (dict, list, str, number, bool, None) as JSON; `origin` names it in the
// InputError for a value JSON cannot hold (a set, an object, NaN).
Json from_python(py::handle value, const std::string& origin);

// A JSON document given as a path (str / os.PathLike: the file is read) or as a dict; `what`
// names the argument in errors, and a dict's origin in InputErrors is `what`.
struct Document {
  Json json;
  std::string origin;  // the file, or `what`
};
Document document_of(py::handle value, const std::string& what);

}  // namespace pipetwin::python
