#!/usr/bin/env bash
# Lists the functions of the production sources (not tests/) whose body is longer than N lines
# (default 120), longest first, as file:function:first-last (lines). It relies on the layout
# clang-format gives the sources: a definition starts at column 0 with its name and "(", its
# signature ends with "{" within a few lines, and its body ends at the next "}" at column 0.
#
#   bash scripts/long-functions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-120}"
find base storage engine config scheduler server sim api http tools \
    -name '*.c' -o -name '*.cc' | sort | while read -r f; do
    awk -v file="$f" -v limit="$limit" '
        function name_of(line,    m) {
            if (match(line, /[A-Za-z_0-9]+[ \t]*\(/)) {
                m = substr(line, RSTART, RLENGTH)
                sub(/[ \t]*\($/, "", m)
                return m
            }
            return "?"
        }
        state == 0 && /^[A-Za-z_]/ && /\(/ && !/^(typedef|enum|struct[ \t]+[A-Za-z_0-9]+[ \t]*\{)/ {
            head = $0; sub(/\(.*/, "", head)
            if (head ~ /=/) next
            name = name_of($0); start = NR; state = 1
        }
        state == 1 {
            if ($0 ~ /\{[ \t]*$/) { body = NR; state = 2; next }
            if ($0 ~ /;[ \t]*$/ || NR - start > 8) { state = 0 }
            next
        }
        state == 2 && $0 == "}" {
            n = NR - body - 1
            if (n > limit) printf "%d %s:%s:%d-%d (%d lines)\n", n, file, name, start, NR, n
            state = 0
        }
    ' "$f"
done | sort -rn | cut -d' ' -f2-
