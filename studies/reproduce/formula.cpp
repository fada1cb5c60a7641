#include "studies/reproduce/formula.hpp"

#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::sim {

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::map<std::string, double>& vars,
         const std::string& origin)
      : s_(text), vars_(vars), origin_(origin) {}

  double parse() {
    const double v = sum();
    skip();
    if (pos_ != s_.size()) fail("unexpected character");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(
        fmt::format("{}: formula \"{}\": {} at position {}", origin_, s_, what, pos_ + 1));
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  double sum() {
    double v = product();
    for (;;) {
      if (eat('+')) {
        v += product();
      } else if (eat('-')) {
        v -= product();
      } else {
        return v;
      }
    }
  }
  double product() {
    double v = unary();
    for (;;) {
      if (eat('*')) {
        v *= unary();
      } else if (eat('/')) {
        v /= unary();
      } else {
        return v;
      }
    }
  }
  double unary() { return eat('-') ? -unary() : atom(); }
  double atom() {
    skip();
    if (eat('(')) {
      const double v = sum();
      if (!eat(')')) fail("missing ')'");
      return v;
    }
    if (pos_ < s_.size() &&
        (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.')) {
      char* end = nullptr;
      const double v = std::strtod(s_.c_str() + pos_, &end);
      pos_ = static_cast<size_t>(end - s_.c_str());
      return v;
    }
    const size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      ++pos_;
    }
    if (start == pos_) fail("expected a number, a variable or '('");
    const std::string name = s_.substr(start, pos_ - start);
    const auto it = vars_.find(name);
    if (it == vars_.end()) {
      pos_ = start;
      fail(fmt::format("unknown variable \"{}\"", name));
    }
    return it->second;
  }

  const std::string& s_;
  const std::map<std::string, double>& vars_;
  const std::string& origin_;
  size_t pos_ = 0;
};

}  // namespace

double eval_formula(const std::string& text, const std::map<std::string, double>& vars,
                    const std::string& origin) {
  return Parser(text, vars, origin).parse();
}

}  // namespace pipetwin::sim
