#!/usr/bin/env bash
# Every library exports only <lib>/include/ (docs/architecture.md): a header that sits in the
# library's folder itself is private to it. This check looks up every private header, by every
# spelling another library could try ("lib/name.h" and "name.h"), in every exported include
# directory (the include path of a program that links all libraries), as the compiler would,
# and fails when one is found there. It also fails when a library's CMakeLists.txt exports a
# directory other than its include/.
#   check_private_headers.sh SOURCE_DIR
set -euo pipefail
src=$1
libs=(base storage engine config scheduler server sim http ui api)
bad=0
found() { # found SPELLING: is SPELLING under an exported include directory?
    local lib
    for lib in "${libs[@]}"; do
        [ -e "$src/$lib/include/$1" ] && return 0
    done
    return 1
}
for l in "${libs[@]}"; do
    # One line per target of the folder (ql_<lib>, and parts of it such as ql_engine_sweep),
    # each exporting include/ and nothing else.
    while IFS= read -r exported; do
        if ! [[ "$exported" =~ ^target_include_directories\(ql_${l}(_[a-z]+)?\ PUBLIC\ \$\{CMAKE_CURRENT_SOURCE_DIR\}/include\)$ ]]; then
            echo "$l/CMakeLists.txt: exports '$exported', expected only \${CMAKE_CURRENT_SOURCE_DIR}/include" >&2
            bad=1
        fi
    done < <(tr -s ' \n' '  ' < "$src/$l/CMakeLists.txt" | grep -Eo 'target_include_directories\([^)]*\)')
    grep -q "target_include_directories(ql_$l PUBLIC" "$src/$l/CMakeLists.txt" ||
        { echo "$l/CMakeLists.txt: ql_$l exports no include directory" >&2; bad=1; }
    for h in "$src/$l"/*.h; do
        [ -e "$h" ] || continue
        name=$(basename "$h")
        for spelling in "$l/$name" "$name"; do
            if found "$spelling"; then
                echo "the private header $l/$name is reachable as \"$spelling\" from other libraries" >&2
                bad=1
            fi
        done
    done
done
# The lookup must find a public header, or the check proves nothing.
if ! found storage/ql_store.h; then
    echo "the public header storage/ql_store.h is not found: the check is broken" >&2
    bad=1
fi
exit $bad
