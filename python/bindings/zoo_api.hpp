// `pipetwin.zoo(name=None, dtype=...)`: `pipetwin zoo [NAME]` from Python (profiles/zoo/zoo.hpp).
//
// Without a name, one row per preset of the analytic zoo (name, layers, params, the published
// parameter count, forward GFLOPs per sample, description). With one, the model: its canonical
// name, family, description, parameter counts (as built, published, tied), forward FLOPs per
// sample, one row per layer (the columns `pipetwin zoo NAME` prints, as numbers: params, forward
// GFLOPs, output and saved MiB per sample in `dtype`) and its edges. Unknown names, presets,
// options and dtypes raise the CLI's InputError.
//
// Thread-safety: GIL held (the descriptors are cheap).
#pragma once

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

void bind_zoo(py::module_& m);

}  // namespace pipetwin::python
