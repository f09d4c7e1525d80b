#!/usr/bin/env bash
# check_layers.sh - no module includes a header of a layer above it, and the
# CMake link graph of the modules has no circle.
#
# The layer order is read from the ```layers block of docs/ARCHITECTURE.md
# (one layer per line, top to bottom; names on one line are peers, which
# may not include each other; "name=a,b" means the module may include only
# the layers a and b, besides its own folder).  The ```include-prefixes
# block maps include prefixes that are not folder names (include/cetcd/)
# to the layer they belong to.  Prefixes that are neither (the generated
# proto headers: cetcdpb/, etcdserverpb/, ...) are not checked.
#
# Checked:
#   1. every `#include "x/..."` in src/<m>/*.[ch]: x must be m itself or a
#      layer below m's line (and in m's "only" list, if it has one);
#   2. every target_link_libraries(cetcd_<m> ... cetcd_<x> ...) in
#      src/*/CMakeLists.txt: the same rule for x;
#   3. the link graph between the cetcd_<layer> libraries has no circle.
# Every src/ folder must be in the layer list.
#
# Usage: scripts/check_layers.sh          exit 0 (clean) or 1 (violations,
#                                         printed as file:line: what)
# Env:   CHECK_LAYERS_ALLOW   space-separated exceptions, "m->x" (module m
#                             may use layer x: includes and links) or
#                             "m->x/file.h" (that one header only).  For
#                             demonstrations; CI passes none.
#        CHECK_LAYERS_DOC     the doc to read (default docs/ARCHITECTURE.md)
set -euo pipefail
cd "$(dirname "$0")/.."

doc=${CHECK_LAYERS_DOC:-docs/ARCHITECTURE.md}
allow=" ${CHECK_LAYERS_ALLOW:-} "
[ -f "$doc" ] || { echo "check_layers: $doc not found" >&2; exit 2; }

# block NAME: the lines of the fenced block ```NAME, comments stripped.
block() {
    awk -v tag="$1" '
        $0 == "```" tag { on = 1; next }
        on && /^```/ { exit }
        on { sub(/#.*/, ""); if ($0 ~ /[^[:space:]]/) print }
    ' "$doc"
}

declare -A rank only alias
n=0
while read -r line; do
    for tok in $line; do
        name=${tok%%=*}
        rank[$name]=$n
        if [ "$tok" != "$name" ]; then
            only[$name]=" ${tok#*=} "
            only[$name]=${only[$name]//,/ }
        fi
    done
    n=$((n + 1))
done < <(block layers)
[ "$n" -gt 0 ] || { echo "check_layers: no \`\`\`layers block in $doc" >&2; exit 2; }
while read -r prefix layer _; do
    alias[$prefix]=$layer
done < <(block include-prefixes)

bad=0
report() {
    echo "$1"
    bad=1
}

# why M X: empty when module M may use layer X, else the reason.
why() {
    local m=$1 x=$2
    if [ "$x" = "$m" ]; then
        return
    elif [ "${rank[$x]}" -lt "${rank[$m]}" ]; then
        echo "$x is a layer above $m"
    elif [ "${rank[$x]}" -eq "${rank[$m]}" ]; then
        echo "$x and $m are peers"
    elif [ -n "${only[$m]:-}" ] && [[ "${only[$m]}" != *" $x "* ]]; then
        echo "$m may include only${only[$m]%" "}"
    fi
}

# 1. includes
for dir in src/*/; do
    m=$(basename "$dir")
    if [ -z "${rank[$m]+x}" ]; then
        report "$dir: folder not in the layer list of $doc"
        continue
    fi
    for f in "$dir"*.c "$dir"*.h "$dir"*.cc; do
        [ -f "$f" ] || continue
        while IFS=: read -r lineno text; do
            path=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/' <<<"$text")
            x=${path%%/*}
            x=${alias[$x]:-$x}
            [ -n "${rank[$x]+x}" ] || continue
            reason=$(why "$m" "$x")
            [ -n "$reason" ] || continue
            [[ "$allow" == *" $m->$x "* || "$allow" == *" $m->$path "* ]] && continue
            report "$f:$lineno: #include \"$path\": $reason"
        done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"/]+/' "$f" || true)
    done
done

# 2. links: "file line target dep" for every cetcd_<layer> -> cetcd_<layer>
declare -A edges
while read -r file lineno t d; do
    m=${t#cetcd_}
    x=${d#cetcd_}
    [ -n "${rank[$m]+x}" ] && [ -n "${rank[$x]+x}" ] || continue
    [[ "$allow" == *" $m->$x "* ]] && continue
    edges[$m]+=" $x"
    reason=$(why "$m" "$x")
    [ -n "$reason" ] && report "$file:$lineno: $t links $d: $reason"
done < <(awk '
    FNR == 1 { text = ""; on = 0 }
    /target_link_libraries[[:space:]]*\(/ { on = 1; start = FNR; text = "" }
    on {
        text = text " " $0
        if (index($0, ")")) {
            sub(/.*target_link_libraries[[:space:]]*\(/, "", text)
            sub(/\).*/, "", text)
            k = split(text, w, /[[:space:]]+/)
            t = ""
            for (i = 1; i <= k; i++) {
                if (w[i] == "" || w[i] ~ /^(PUBLIC|PRIVATE|INTERFACE)$/)
                    continue
                if (t == "") { t = w[i]; continue }
                if (t ~ /^cetcd_/ && w[i] ~ /^cetcd_/)
                    print FILENAME, start, t, w[i]
            }
            on = 0
        }
    }' src/*/CMakeLists.txt)

# 3. circles in the link graph: peel off libraries that link nothing left
# (Kahn); what remains lies on or behind a circle, and a walk inside it
# finds one.
declare -A left
for m in "${!edges[@]}"; do
    left[$m]=1
    for x in ${edges[$m]}; do left[$x]=1; done
done
changed=1
while [ "$changed" -eq 1 ]; do
    changed=0
    for m in "${!left[@]}"; do
        sink=1
        for x in ${edges[$m]:-}; do
            [ -n "${left[$x]+x}" ] && { sink=0; break; }
        done
        if [ "$sink" -eq 1 ]; then
            unset "left[$m]"
            changed=1
        fi
    done
done
if [ "${#left[@]}" -gt 0 ]; then
    declare -A seen
    m=$(printf '%s\n' "${!left[@]}" | sort | head -n 1)
    walk=()
    while [ -z "${seen[$m]+x}" ]; do
        seen[$m]=${#walk[@]}
        walk+=("$m")
        for x in ${edges[$m]}; do
            [ -n "${left[$x]+x}" ] && { m=$x; break; }
        done
    done
    circle="${walk[*]:${seen[$m]}} $m"
    report "src/*/CMakeLists.txt: the link graph has a circle: cetcd_${circle// / -> cetcd_}"
fi

if [ "$bad" -ne 0 ]; then
    echo "check_layers: FAILED (layer order: $doc)"
    exit 1
fi
echo "check_layers: ok (${#rank[@]} modules in $n layers)"
