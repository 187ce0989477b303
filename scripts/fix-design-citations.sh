#!/usr/bin/env bash
# Points citations of the old, out-of-repository contract files at docs/design/.
#
# TEMPORARY: this script exists only so the change can be re-applied after other branches that
# still carry old citations are merged; it will be removed once they are. Safe to run again: a
# citation that already reads docs/design/NAME.md is left alone.
#
# Rewrites, in every tracked text file except docs/design/ and this script:
#   OLD/NAME.md, ../OLD/NAME.md, ../../OLD/NAME.md      ->  docs/design/NAME.md
#   a bare NAME.md (not part of a longer path or name) ->  docs/design/NAME.md
# for NAME in the contract files of docs/design/, where OLD is the old folder's name (written
# s[p]ec below, so that this file does not match the check that follows). C sources that
# changed are then run through clang-format (the repository's .clang-format), which re-wraps
# comment lines that grew past 100 columns.
# Afterwards `git grep -n -E '(^|[^/a-z])s[p]ec/'` prints nothing outside docs/design/.
#
# Usage: scripts/fix-design-citations.sh   (from anywhere inside the work tree)
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"

# The patterns reach perl through the environment, never inside its program text, so no
# delimiter or quoting can clash with them. A match must not follow a path or name character,
# so docs/design/jobs.md, docs/job-templates.md or conf/jobs.yaml never match.
export QL_NAMES='auto-segment-build|jobs|metadata|rest-api|scenarios|cluster|multi-host'
export QL_OLD='(?<![A-Za-z0-9_./-])(?:\.\./)*s[p]ec/('"$QL_NAMES"')\.md\b'
export QL_BARE='(?<![A-Za-z0-9_./-])('"$QL_NAMES"')\.md\b'

mapfile -d '' files < <(git ls-files -z -- . ':!:docs/design/' ':!:scripts/fix-design-citations.sh' ':!:tests/fuzz/corpus/')

changed=()
for f in "${files[@]}"; do
    f=./$f # a tracked name may start with '-'
    [[ -f $f ]] || continue
    grep -Iq . "$f" 2>/dev/null || continue # skip binary and empty files
    if perl -0777 -ne 'exit(/$ENV{QL_OLD}|$ENV{QL_BARE}/ ? 0 : 1)' "$f"; then
        perl -pi -e 's/$ENV{QL_OLD}/docs\/design\/$1.md/g; s/$ENV{QL_BARE}/docs\/design\/$1.md/g' "$f"
        changed+=("$f")
    fi
done

for f in "${changed[@]}"; do
    case $f in
    *.c | *.h | *.cc) clang-format -i "$f" ;;
    esac
done

((${#changed[@]} == 0)) || printf '%s\n' "${changed[@]}"
