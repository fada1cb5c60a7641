// Formula: the closed forms a paper prints ("T_F + T_B/K", "K-k+1"), evaluated.
//
// Reference tables keep a paper's formulas as the paper writes them; entries evaluate them at
// the setting they simulate instead of re-typing them in code. Grammar: sums and differences of
// products and quotients of numbers, variables and parenthesised formulas; unary minus.
//
// Thread-safety: pure function.
#pragma once

#include <map>
#include <string>

namespace pipetwin::sim {

// Evaluates `text` with `vars`; InputError naming `origin` and the position on a syntax error or
// an unknown variable.
double eval_formula(const std::string& text, const std::map<std::string, double>& vars,
                    const std::string& origin);

}  // namespace pipetwin::sim
