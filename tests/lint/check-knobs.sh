#!/bin/sh
# README's table of TUTTI_* variables and the library's knob table list the same names.
set -eu
readme=$1
run=$2
from_lib=$("$run" --env | awk '{print $1}' | sort)
from_readme=$(grep -o '^| `TUTTI_[A-Z0-9_]*`' "$readme" | tr -d '|` ' | sort)
if [ "$from_lib" != "$from_readme" ]; then
    echo "README's variable table and the knob table differ:"
    echo "$from_lib" > /tmp/knobs-lib.$$
    echo "$from_readme" > /tmp/knobs-readme.$$
    diff /tmp/knobs-lib.$$ /tmp/knobs-readme.$$ || true
    rm -f /tmp/knobs-lib.$$ /tmp/knobs-readme.$$
    exit 1
fi
echo "README documents all $(echo "$from_lib" | wc -l) TUTTI_* variables"
