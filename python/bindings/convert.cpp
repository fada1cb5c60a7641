#include "python/bindings/convert.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "python/bindings/options.hpp"

namespace pipetwin::python {

py::object to_python(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return py::none();
    case Json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case Json::value_t::number_integer:
      return py::int_(value.get<int64_t>());
    case Json::value_t::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case Json::value_t::number_float:
      return py::float_(value.get<double>());
    case Json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case Json::value_t::array: {
      py::list out;
      for (const auto& item : value) out.append(to_python(item));
      return out;
    }
    case Json::value_t::object: {
      py::dict out;
      for (const auto& [key, item] : value.items()) out[py::str(key)] = to_python(item);
      return out;
    }
    default:
      return py::none();  // binary and discarded values: pipetwin writes neither
  }
}

Json from_python(py::handle value, const std::string& origin) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();
  if (py::isinstance<py::float_>(value)) {
    const double x = value.cast<double>();
    if (!std::isfinite(x)) throw InputError(fmt::format("{}: {} is not a JSON number", origin, x));
    return x;
  }
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::dict>(value)) {
    Json out = Json::object();
    for (const auto item : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first)) {
        throw InputError(fmt::format("{}: a key is not a str ({})", origin,
                                     py::repr(item.first).cast<std::string>()));
      }
      out[item.first.cast<std::string>()] = from_python(item.second, origin);
    }
    return out;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    Json out = Json::array();
    for (const auto item : value.cast<py::sequence>()) out.push_back(from_python(item, origin));
    return out;
  }
  throw InputError(fmt::format("{}: cannot be written as JSON: {}", origin,
                               py::repr(value).cast<std::string>()));
}

Document document_of(py::handle value, const std::string& what) {
  if (py::isinstance<py::dict>(value)) return {from_python(value, what), what};
  const std::string path = path_text(value, what);
  return {load_json_file(path), path};
}

}  // namespace pipetwin::python
