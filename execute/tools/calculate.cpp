// calculate {expression}: arithmetic by a small recursive-descent parser —
// never eval. Numbers, + - * / % ^ (right-associative; ** the same, as in
// Python), // (floor division) and % (the divisor's sign) as in Python, unary +/-,
// parentheses, the constants pi and e, and the functions sqrt abs sin cos tan
// asin acos atan log (base 10) ln log2 exp floor ceil round min max pow.
// Bounded: 1000 characters, nesting depth 64. An expression that does not
// evaluate (syntax, division by zero, a non-finite result, too long or deep)
// is E_CALC_ERROR (the AI Orchestrator seed's; alias E_INVALID_ARGS).
// data: {expression, result}; the result is an integer when it is one
// exactly (the seed's "(2 + 3) * 4 ** 2" is 80, not 80.0).
#include <cctype>
#include <cmath>
#include <numbers>

#include "execute/tools/tools.h"

namespace tollgate {

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool Parse(double* out, std::string* err) {
    double v = Expr();
    Skip();
    if (err_.empty() && i_ != s_.size())
      err_ = "unexpected '" + std::string(1, s_[i_]) + "' at " + std::to_string(i_);
    if (!err_.empty()) {
      *err = err_;
      return false;
    }
    *out = v;
    return true;
  }

 private:
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool EatTwo(const char* two) {
    Skip();
    if (i_ + 1 < s_.size() && s_[i_] == two[0] && s_[i_ + 1] == two[1]) {
      i_ += 2;
      return true;
    }
    return false;
  }
  double Fail(const std::string& why) {
    if (err_.empty()) err_ = why;
    return 0;
  }
  double Expr() {
    if (++depth_ > 64) return Fail("expression nested too deeply");
    double v = Term();
    for (;;) {
      if (Eat('+'))
        v += Term();
      else if (Eat('-'))
        v -= Term();
      else
        break;
    }
    --depth_;
    return v;
  }
  double Term() {
    double v = Unary();
    for (;;) {
      if (Eat('*'))
        v *= Unary();
      else if (EatTwo("//")) {
        double d = Unary();
        if (d == 0) return Fail("division by zero");
        v = std::floor(v / d);
      } else if (Eat('/')) {
        double d = Unary();
        if (d == 0) return Fail("division by zero");
        v /= d;
      } else if (Eat('%')) {
        double d = Unary();
        if (d == 0) return Fail("modulo by zero");
        // Python's: the sign of the divisor, so a // b * b + a % b == a.
        double r = std::fmod(v, d);
        if (r != 0 && ((r < 0) != (d < 0))) r += d;
        v = r;
      } else
        break;
    }
    return v;
  }
  double Unary() {
    if (++depth_ > 64) return Fail("expression nested too deeply");
    double v;
    if (Eat('-'))
      v = -Unary();
    else if (Eat('+'))
      v = Unary();
    else
      v = Power();
    --depth_;
    return v;
  }
  double Power() {
    double base = Primary();
    // Right-associative; -2^2 = -(2^2). Checked before Term's '*' sees it.
    if (EatTwo("**") || Eat('^')) return std::pow(base, Unary());
    return base;
  }
  double Primary() {
    Skip();
    if (!err_.empty() || i_ >= s_.size()) return Fail("unexpected end of expression");
    if (Eat('(')) {
      double v = Expr();
      if (!Eat(')')) return Fail("missing ')'");
      return v;
    }
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t start = i_;
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.')) ++i_;
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        size_t save = i_++;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
          while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
        } else {
          i_ = save;
        }
      }
      const std::string num = s_.substr(start, i_ - start);
      char* end = nullptr;
      double v = std::strtod(num.c_str(), &end);
      if (end != num.c_str() + num.size()) return Fail("bad number '" + num + "'");
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c))) {
      size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      const std::string id = s_.substr(start, i_ - start);
      if (id == "pi") return std::numbers::pi;
      if (id == "e") return std::numbers::e;
      if (!Eat('(')) return Fail("unknown name '" + id + "'");
      std::vector<double> a;
      if (!Eat(')')) {
        do a.push_back(Expr());
        while (Eat(','));
        if (!Eat(')')) return Fail("missing ')' after arguments of " + id);
      }
      return Call(id, a);
    }
    return Fail("unexpected '" + std::string(1, c) + "' at " + std::to_string(i_));
  }
  double Call(const std::string& f, const std::vector<double>& a) {
    auto one = [&](double (*fn)(double)) { return a.size() == 1 ? fn(a[0]) : Fail(f + " takes 1 argument"); };
    if (f == "sqrt") return one([](double x) { return std::sqrt(x); });
    if (f == "abs") return one([](double x) { return std::fabs(x); });
    if (f == "sin") return one([](double x) { return std::sin(x); });
    if (f == "cos") return one([](double x) { return std::cos(x); });
    if (f == "tan") return one([](double x) { return std::tan(x); });
    if (f == "asin") return one([](double x) { return std::asin(x); });
    if (f == "acos") return one([](double x) { return std::acos(x); });
    if (f == "atan") return one([](double x) { return std::atan(x); });
    if (f == "log") return one([](double x) { return std::log10(x); });
    if (f == "ln") return one([](double x) { return std::log(x); });
    if (f == "log2") return one([](double x) { return std::log2(x); });
    if (f == "exp") return one([](double x) { return std::exp(x); });
    if (f == "floor") return one([](double x) { return std::floor(x); });
    if (f == "ceil") return one([](double x) { return std::ceil(x); });
    if (f == "round") return one([](double x) { return std::round(x); });
    if (f == "pow") return a.size() == 2 ? std::pow(a[0], a[1]) : Fail("pow takes 2 arguments");
    if (f == "min" || f == "max") {
      if (a.empty()) return Fail(f + " takes at least 1 argument");
      double v = a[0];
      for (double x : a) v = f == "min" ? std::min(v, x) : std::max(v, x);
      return v;
    }
    return Fail("unknown function '" + f + "'");
  }

  const std::string& s_;
  size_t i_ = 0;
  int depth_ = 0;
  std::string err_;
};

class Calculate : public BuiltinTool {
 public:
  Calculate() : BuiltinTool("calculate") {}
  Json Run(const Json& args, const ToolContext&) const override {
    std::string expr;
    if (!StringArg(args, "expression", &expr))
      return ToolFail(errc::kInvalidArgs, "expression (string) is required");
    if (expr.empty() || expr.size() > 1000)
      return ToolFail(errc::kCalcError, "expression must be 1 to 1000 characters");
    double v = 0;
    std::string err;
    if (!Parser(expr).Parse(&v, &err)) return ToolFail(errc::kCalcError, err);
    if (!std::isfinite(v)) return ToolFail(errc::kCalcError, "the result is not a finite number");
    // Exact integers (within a double's 2^53) as integers; -0 is 0.
    constexpr double kExact = 9007199254740992.0;
    if (v == std::trunc(v) && std::fabs(v) <= kExact)
      return ToolOk({{"expression", expr}, {"result", static_cast<int64_t>(v)}});
    return ToolOk({{"expression", expr}, {"result", v}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeCalculate() { return std::make_unique<Calculate>(); }

}  // namespace tollgate
