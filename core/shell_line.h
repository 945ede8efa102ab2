// One shell command line read as POSIX sh reads it, into the simple commands
// it contains, so that a policy can hold for each of them and execute can
// run exactly what was decided (docs/policy.md, "Command lines").
//
// Understood: words with '...', "..." and backslash escapes (quotes removed);
// the operators | || && ; & and newline; redirections < > >> >| N>&M N<&M
// (M a digit or '-'), an optional single-digit fd before each, and bash's
// &> and &>> (stdout and stderr); comments (# at the start of a word).
//
// Anything whose meaning depends on run time makes the line kUnanalysable,
// with `reason` naming the construct: command substitution $(...) and
// `...` (also inside "..."), process substitution <( >(, any expansion a $
// starts ($X, ${X}, $((...)), $'...'; a $ is literal only before a blank or
// the end of the word), subshells and groups ( ) { }, here-documents << <<-
// <<<, tilde expansion (~ at the start of a word), assignments (X=1 cmd),
// control keywords (if, for, while, case, !, [[ ...), eval, exec, source, .,
// shells (sh, bash, dash, zsh...) and busybox as the command, unquoted
// * ? [ in the command word, and a redirection with no command.
// kInvalid: what no shell would run (an unterminated quote, a line ending
// in |, && or ||, an empty command between operators, no command at all)
// and the limits: at most kMaxShellLineBytes bytes, kMaxSimpleCommands
// simple commands, no NUL byte.
//
// Pure and thread-safe. The parse stops at the first unanalysable construct;
// `commands` then holds the simple commands before it, the one it
// interrupts with the words read so far (a deny pattern may still match
// one of them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

inline constexpr size_t kMaxShellLineBytes = 16 << 10;
inline constexpr size_t kMaxSimpleCommands = 64;

struct ShellRedirection {
  int fd = 1;          // the descriptor redirected (&> and &>>: 1, and 2 with it)
  std::string op;      // "<", ">", ">>", ">|", "<&", ">&", "&>", "&>>"
  std::string target;  // a file (quotes removed); for <& and >&: a digit or "-"
  // Whether the target is a file name (every op but <& and >&).
  bool names_file() const { return op != "<&" && op != ">&"; }
  // Whether the command may write through it (>, >>, >|, &>, &>>).
  bool writes() const { return op != "<" && op != "<&"; }
};

struct SimpleCommand {
  std::vector<std::string> argv;  // never empty in a parsed line
  std::vector<ShellRedirection> redirections;
  std::string next;  // the operator after it: "|", "||", "&&", ";", "&", or "" (the last)
};

struct ShellLine {
  enum class Kind { kOk, kUnanalysable, kInvalid };
  Kind kind = Kind::kInvalid;
  std::string reason;  // "" when kOk; else what and where ("command substitution $(...)")
  std::vector<SimpleCommand> commands;
  bool ok() const { return kind == Kind::kOk; }
};

ShellLine ParseShellLine(std::string_view line);

// argv joined by single spaces: what a policy's "bash:..." globs see of one
// simple command ("bash:" + JoinArgv(argv)).
std::string JoinArgv(const std::vector<std::string>& argv);

// A redirection target a command line may name: a relative path without a
// ".." component (it resolves inside the workspace, the command's cwd), or
// /dev/null.
bool IsWorkspaceRedirectTarget(std::string_view target);

// Whether simple command i of `line` is a pure text filter of a pipe: its
// input comes from the command before it through `|`, it has no
// redirections, and its argv is one of a fixed table of filters (head,
// tail, wc, sort, uniq, grep, cut, tr, cat, tac, rev, nl) with only the
// short options that read no file and write nothing (no long options, no
// -f/-o/-r/-T) and no file operand (grep's one pattern, tr's sets). Such a
// command only reshapes the output the command before it made, so an allow
// glob holding for that command holds for it too (docs/policy.md, "Command
// lines": `git status | head` under `bash:git *`).
bool IsPipeFilter(const ShellLine& line, size_t i);

// `word` single-quoted for sh: exactly that word, no expansion of any kind.
std::string ShellQuote(std::string_view word);

// A sh script running `line`'s commands (line.ok() required) with every word
// single-quoted, so that each argv is exactly the parsed one; argv[0] of
// command i is programs[i] when `programs` is given (the resolved program,
// so no builtin, function or PATH lookup stands in for it). Newlines become
// ';', &> becomes >FILE 2>&1.
std::string RenderShellLine(const ShellLine& line, const std::vector<std::string>& programs = {});

}  // namespace tollgate
