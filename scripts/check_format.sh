#!/bin/sh
# The tree stays formatted by its own .clang-format (run by ctest as
# Format.EveryCppFileMatchesTheRepositoryClangFormat). Lists each file that
# drifts; fix with: git ls-files '*.cpp' '*.h' | xargs clang-format -i
cd "$(dirname "$0")/.." || exit 2
cf=$(command -v clang-format || command -v clang-format-14) || {
  echo "format: clang-format missing (scripts/setup.sh installs it)"; exit 1; }
list=$(mktemp) && trap 'rm -f "$list"' EXIT
git ls-files '*.cpp' '*.h' '*.cc' > "$list" 2>/dev/null || find . -path ./build -prune -o \( -name '*.cpp' -o -name '*.h' \) -print > "$list"
drift=$(xargs "$cf" --dry-run < "$list" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u)
if [ -n "$drift" ]; then
  echo "$drift" | sed 's/^/format: drifts from .clang-format: /'
  exit 1
fi
echo "format: ok ($(wc -l < "$list") files)"
