// A command line read as POSIX sh reads it (core/shell_line.h): one pass of
// token recognition (XCU 2.3) feeding a simple-command builder (2.9.1).
#include "core/shell_line.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace tollgate {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Reserved words of sh and bash: a command position holding one starts a
// compound command, which this reader does not follow.
bool IsKeyword(const std::string& w) {
  static const char* const kWords[] = {"!",      "{",    "}",    "[[",    "]]",    "case",     "do", "done",
                                       "elif",   "else", "esac", "fi",    "for",   "function", "if", "in",
                                       "select", "then", "time", "until", "while", "coproc"};
  for (const char* k : kWords) {
    if (w == k) return true;
  }
  return false;
}

// A command that runs a line or file of its own as shell code.
bool IsShellOrEval(const std::string& w) {
  const auto slash = w.rfind('/');
  const std::string base = slash == std::string::npos ? w : w.substr(slash + 1);
  for (const char* k : {"eval", "exec", "source", "."}) {
    if (base == k) return true;
  }
  // Versioned names count too (bash5.2, ksh93).
  for (const char* k : {"sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "csh", "tcsh", "fish", "ash",
                        "yash", "posh", "rbash", "busybox"}) {
    const size_t n = std::strlen(k);
    if (base.compare(0, n, k) != 0) continue;
    bool versioned = true;
    for (size_t i = n; i < base.size(); ++i) {
      versioned = versioned &&
                  (std::isdigit(static_cast<unsigned char>(base[i])) || base[i] == '.' || base[i] == '-');
    }
    if (versioned) return true;
  }
  return false;
}

// What a '$' at s[i] starts: "" for a literal '$' (before a blank, a
// newline, the end, or the closing quote of "..."), else the construct.
std::string DollarConstruct(std::string_view s, size_t i, bool in_dquote) {
  const char c = i + 1 < s.size() ? s[i + 1] : '\0';
  if (c == '\0' || IsBlank(c) || c == '\n' || (in_dquote && c == '"')) return "";
  if (c == '(')
    return i + 2 < s.size() && s[i + 2] == '(' ? "arithmetic expansion $((...))"
                                               : "command substitution $(...)";
  if (c == '{') return "parameter expansion ${...}";
  if (c == '\'') return "ANSI-C quoting $'...'";
  if (c == '"') return "locale quoting $\"...\"";
  if (IsNameStart(c)) {
    size_t e = i + 1;
    while (e < s.size() && IsNameChar(s[e]) && e - i < 40) ++e;
    return "parameter expansion $" + std::string(s.substr(i + 1, e - i - 1));
  }
  return "parameter expansion $" + std::string(1, c);
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  ShellLine Run() {
    if (s_.size() > kMaxShellLineBytes) {
      InvalidHere("the line is longer than " + std::to_string(kMaxShellLineBytes) + " bytes");
    } else if (s_.find('\0') != std::string_view::npos) {
      InvalidHere("the line holds a NUL byte");
    }
    while (i_ < s_.size() && !failed_) Step();
    if (!failed_) EndWord();
    if (!failed_) End();
    if (!failed_) out_.kind = ShellLine::Kind::kOk;
    return std::move(out_);
  }

 private:
  // The word being read.
  struct Word {
    std::string text;
    bool started = false;
    bool digits = true;       // only unquoted digits so far (an fd before < or >)
    bool name = true;         // only unquoted name characters so far
    bool assignment = false;  // NAME= unquoted at its start
    bool glob = false;        // an unquoted * ? [
  };

  // Ends the reading: `k` with `why`.
  void Fail(ShellLine::Kind k, std::string why) {
    failed_ = true;
    out_.kind = k;
    out_.reason = std::move(why);
    // The command the construct interrupts, with the words read so far.
    if (k == ShellLine::Kind::kUnanalysable && !cur_.argv.empty() &&
        out_.commands.size() < kMaxSimpleCommands) {
      out_.commands.push_back(std::move(cur_));
    }
    cur_ = {};
  }
  void Unanalysable(std::string why) { Fail(ShellLine::Kind::kUnanalysable, std::move(why)); }
  void InvalidHere(std::string why) { Fail(ShellLine::Kind::kInvalid, std::move(why)); }

  // The end of the line: the last command, or what it lacks.
  void End() {
    if (pending_redir_) return InvalidHere("the redirection " + redir_.op + " has no target");
    if (!cur_.argv.empty() || !cur_.redirections.empty()) return EndCommand("");
    if (out_.commands.empty()) return InvalidHere("no command");
    std::string& last = out_.commands.back().next;
    if (last == "|" || last == "&&" || last == "||") return InvalidHere("the line ends with " + last);
    if (last == ";") last.clear();
  }

  void Quoted(char c) {
    w_.text += c;
    w_.started = true;
    w_.digits = w_.name = false;
  }
  void Plain(char c) {
    if (c == '*' || c == '?' || c == '[') w_.glob = true;
    if (c == '=' && w_.name && !w_.text.empty() && !w_.assignment) w_.assignment = true;
    if (!IsNameChar(c) || (w_.text.empty() && !IsNameStart(c))) w_.name = false;
    if (!std::isdigit(static_cast<unsigned char>(c))) w_.digits = false;
    w_.text += c;
    w_.started = true;
  }

  void Step() {
    const char c = s_[i_];
    if (IsBlank(c)) {
      EndWord();
      ++i_;
    } else if (c == '\\') {
      if (i_ + 1 >= s_.size()) return InvalidHere("a trailing backslash");
      if (s_[i_ + 1] != '\n') Quoted(s_[i_ + 1]);  // backslash-newline: a continuation
      i_ += 2;
    } else if (c == '\'') {
      const size_t close = s_.find('\'', i_ + 1);
      if (close == std::string_view::npos) return InvalidHere("an unterminated '");
      for (size_t k = i_ + 1; k < close; ++k) Quoted(s_[k]);
      w_.started = true;
      w_.digits = w_.name = false;
      i_ = close + 1;
    } else if (c == '"') {
      DoubleQuoted();
    } else if (c == '`') {
      Unanalysable("command substitution `...`");
    } else if (c == '$') {
      std::string what = DollarConstruct(s_, i_, false);
      if (!what.empty()) return Unanalysable(what);
      Plain('$');
      ++i_;
    } else if (c == '#' && !w_.started) {
      while (i_ < s_.size() && s_[i_] != '\n') ++i_;
    } else if (c == '~' && !w_.started) {
      Unanalysable("tilde expansion (~ at the start of a word)");
    } else if (std::strchr("|&;<>()\n", c) != nullptr) {
      Operator();
    } else {
      Plain(c);
      ++i_;
    }
  }

  void DoubleQuoted() {
    w_.started = true;
    w_.digits = w_.name = false;
    for (++i_;; ++i_) {
      if (i_ >= s_.size()) return InvalidHere("an unterminated \"");
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return;
      }
      if (c == '\\' && i_ + 1 < s_.size() && std::strchr("$`\"\\\n", s_[i_ + 1]) != nullptr) {
        if (s_[i_ + 1] != '\n') Quoted(s_[i_ + 1]);
        ++i_;
      } else if (c == '`') {
        return Unanalysable("command substitution `...` (inside \"...\")");
      } else if (c == '$') {
        std::string what = DollarConstruct(s_, i_, true);
        if (!what.empty()) return Unanalysable(what + " (inside \"...\")");
        Quoted('$');
      } else {
        Quoted(c);
      }
    }
  }

  void Operator() {
    const std::string_view rest = s_.substr(i_);
    // An all-digit word right before < or > is the fd it redirects.
    int fd = -1;
    if ((rest[0] == '<' || rest[0] == '>') && w_.started && w_.digits) {
      if (w_.text.size() > 1) return Unanalysable("file descriptor " + w_.text + " (above 9)");
      fd = w_.text[0] - '0';
      w_ = {};
    } else {
      EndWord();
      if (failed_) return;
    }
    static const char* const kOps[] = {"&>>", "<<<", "<<-", "&&", "||", ";;", "|&", "<<",
                                       "<>",  "<&",  ">&",  ">>", ">|", "&>", "<(", ">(",
                                       "|",   "&",   ";",   "<",  ">",  "(",  ")",  "\n"};
    std::string op;
    for (const char* o : kOps) {
      if (rest.substr(0, std::strlen(o)) == o) {
        op = o;
        break;
      }
    }
    if (op == "(" || op == ")") return Unanalysable("a subshell or group ( )");
    if (op == ";;") return Unanalysable("the case terminator ;;");
    if (op == "|&") return Unanalysable("|& (bash's pipe of stderr)");
    if (op == "<<" || op == "<<-") return Unanalysable("a here-document <<");
    if (op == "<<<") return Unanalysable("a here-string <<<");
    if (op == "<(" || op == ">(") return Unanalysable("process substitution " + op + "...)");
    if (op == "<>") return Unanalysable("the read-write redirection <>");
    i_ += op.size();
    if (pending_redir_) return InvalidHere("the redirection " + redir_.op + " has no target");
    if (op[0] == '<' || op[0] == '>' || op == "&>" || op == "&>>") {
      pending_redir_ = true;
      redir_ = {};
      redir_.op = op;
      redir_.fd = fd >= 0 ? fd : op[0] == '<' ? 0 : 1;
      return;
    }
    Control(op);
  }

  // | || && ; & or a newline.
  void Control(const std::string& op) {
    if (cur_.argv.empty() && cur_.redirections.empty()) {
      if (op == "\n") return;  // a blank line, or a list continued after | && ||
      return InvalidHere(out_.commands.empty()
                             ? "'" + op + "' with no command before it"
                             : "'" + op + "' right after '" + out_.commands.back().next + "'");
    }
    EndCommand(op == "\n" ? ";" : op);
  }

  void EndCommand(const std::string& next) {
    if (cur_.argv.empty()) return Unanalysable("a redirection without a command");
    if (out_.commands.size() >= kMaxSimpleCommands) {
      return InvalidHere("more than " + std::to_string(kMaxSimpleCommands) + " simple commands");
    }
    cur_.next = next;
    out_.commands.push_back(std::move(cur_));
    cur_ = {};
  }

  void EndWord() {
    if (!w_.started) return;
    Word w = std::move(w_);
    w_ = {};
    if (pending_redir_) {
      pending_redir_ = false;
      redir_.target = w.text;
      if (!redir_.names_file() &&
          !(w.text == "-" || (w.text.size() == 1 && std::isdigit(static_cast<unsigned char>(w.text[0]))))) {
        return Unanalysable(redir_.op + w.text + " (" + redir_.op + " onto a file rather than a descriptor)");
      }
      cur_.redirections.push_back(std::move(redir_));
      return;
    }
    if (cur_.argv.empty()) {
      if (w.assignment)
        return Unanalysable("the assignment " + w.text.substr(0, w.text.find('=') + 1) +
                            "... before a command");
      if (IsKeyword(w.text)) return Unanalysable("the control keyword '" + w.text + "'");
      if (IsShellOrEval(w.text))
        return Unanalysable("'" + w.text + "' as the command (it runs code of its own)");
      if (w.glob) return Unanalysable("an unquoted glob (* ? [) in the command name '" + w.text + "'");
    }
    cur_.argv.push_back(std::move(w.text));
  }

  std::string_view s_;
  size_t i_ = 0;
  bool failed_ = false;
  ShellLine out_;
  SimpleCommand cur_;
  Word w_;
  bool pending_redir_ = false;
  ShellRedirection redir_;
};

}  // namespace

ShellLine ParseShellLine(std::string_view line) { return Reader(line).Run(); }

std::string JoinArgv(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

bool IsWorkspaceRedirectTarget(std::string_view t) {
  if (t == "/dev/null") return true;
  if (t.empty() || t[0] == '/') return false;
  size_t b = 0;
  for (;;) {
    const size_t e = t.find('/', b);
    if (t.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b) == "..") return false;
    if (e == std::string_view::npos) return true;
    b = e + 1;
  }
}

std::string ShellQuote(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string RenderShellLine(const ShellLine& line, const std::vector<std::string>& programs) {
  std::string out;
  for (size_t i = 0; i < line.commands.size(); ++i) {
    const SimpleCommand& c = line.commands[i];
    for (size_t k = 0; k < c.argv.size(); ++k) {
      if (k > 0) out += ' ';
      out += ShellQuote(k == 0 && i < programs.size() ? programs[i] : c.argv[k]);
    }
    for (const auto& r : c.redirections) {
      out += ' ';
      if (r.op == "&>" || r.op == "&>>") {
        out += (r.op == "&>" ? ">" : ">>") + ShellQuote(r.target) + " 2>&1";
      } else {
        out += std::to_string(r.fd) + r.op + (r.names_file() ? ShellQuote(r.target) : r.target);
      }
    }
    if (!c.next.empty()) out += " " + c.next + (i + 1 < line.commands.size() ? " " : "");
  }
  return out;
}

namespace {

struct FilterSpec {
  std::string_view name;
  std::string_view flags;   // short options without a value
  std::string_view valued;  // short options taking a value
  int min_operands, max_operands;
  bool numeric_option = false;  // head -5, tail -20
};

// Options that read a file, write one, recurse or run a program are absent
// on purpose (grep -f -r, sort -o -T, --anything).
constexpr FilterSpec kFilters[] = {
    {"head", "qvz", "nc", 0, 0, true},
    {"tail", "qvzrfF", "nc", 0, 0, true},
    {"wc", "lwcmL", "", 0, 0},
    {"sort", "rnufhVbMgsz", "kt", 0, 0},
    {"uniq", "cduiz", "fsw", 0, 0},
    {"grep", "ivncEFwxoqhHsz", "mABCe", 0, 1},
    {"cut", "szn", "dfcb", 0, 0},
    {"tr", "dscCt", "", 1, 2},
    {"cat", "nbsAETv", "", 0, 0},
    {"tac", "", "", 0, 0},
    {"rev", "", "", 0, 0},
    {"nl", "", "bnwsvi", 0, 0},
};

bool FilterArgsOk(const FilterSpec& f, const std::vector<std::string>& argv) {
  int operands = 0;
  bool pattern_given = false, options_done = false;
  for (size_t k = 1; k < argv.size(); ++k) {
    const std::string& w = argv[k];
    if (options_done || w.size() < 2 || w[0] != '-') {
      if (w != "-") ++operands;  // "-" is standard input
      continue;
    }
    if (w == "--") {
      options_done = true;
      continue;
    }
    if (w[1] == '-') return false;  // no long options
    if (f.numeric_option && std::all_of(w.begin() + 1, w.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    for (size_t j = 1; j < w.size(); ++j) {
      const char c = w[j];
      if (f.flags.find(c) != std::string_view::npos) continue;
      if (f.valued.find(c) == std::string_view::npos) return false;
      if (c == 'e') pattern_given = true;
      if (j + 1 == w.size() && ++k >= argv.size()) return false;  // its value is the next word
      break;                                                      // the rest of the word is its value
    }
  }
  // grep reads its pattern as its one operand unless -e gave it.
  const int max = f.name == "grep" && !pattern_given ? 1 : f.max_operands;
  const int min = f.name == "grep" && !pattern_given ? 1 : f.min_operands;
  return operands >= min && operands <= max;
}

}  // namespace

bool IsPipeFilter(const ShellLine& line, size_t i) {
  if (i == 0 || i >= line.commands.size() || line.commands[i - 1].next != "|") return false;
  const SimpleCommand& c = line.commands[i];
  if (!c.redirections.empty() || c.argv.empty()) return false;
  std::string name = c.argv[0];
  if (name == "egrep" || name == "fgrep") name = "grep";
  for (const FilterSpec& f : kFilters) {
    if (f.name == name) return FilterArgsOk(f, c.argv);
  }
  return false;
}

}  // namespace tollgate
