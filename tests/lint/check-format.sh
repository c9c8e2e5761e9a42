#!/bin/sh
# Every C and C++ file follows the checked-in .clang-format; drift fails.
set -eu
cd "$1"
command -v clang-format >/dev/null || { echo "clang-format is not installed"; exit 1; }
files=$(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null || find . -name '*.[ch]' -o -name '*.[ch]pp' -not -path './build*')
clang-format --dry-run --Werror $files
echo "formatting ok ($(echo "$files" | wc -w) files)"
