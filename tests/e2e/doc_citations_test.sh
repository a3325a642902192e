#!/usr/bin/env bash
# Every document that a comment in src/, include/ or tests/ cites is in the repository, and every
# section it cites is a heading of that document. Fails naming file:line for each broken citation.
#
# What counts as a citation:
#   - a name ending in .md, cited by its path from the repository root (docs/output-formats.md,
#     tests/data/deepspeed/FIXTURES.md); a bare name (FIXTURES.md) must be at the root (README.md);
#   - a section sign and number after it (§6, §6.5, §1b), possibly several, on later lines too: a
#     section belongs to the last document named before it in the same file, so a bare section
#     in a later comment refers to the document cited above it; the document must have a heading
#     with that number ("## 6. ...", "### 6.5 ...");
#   - a quoted title right after a document name (docs/synth.md "Values", README.md, "Options"):
#     the document must have a heading with exactly that title.
# Scanned: C++, shell, Python and CMake sources; not tests/data or the fuzz corpus, nor this
# script (its own examples are not citations).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
self=tests/e2e/doc_citations_test.sh
export LC_ALL=C

# Citations in files being rewritten on another branch, which fixes them there:
# "<file> <cited document>". Each entry must still match something, so that it is removed once
# the rewrite lands.
pending=()

# Every citation as "<file>:<line><TAB><kind><TAB><document>[<TAB><section or title>]".
citations() {
    find src include tests -type f \
        \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.sh' -o -name '*.py' \
        -o -name '*.cmake' -o -name 'CMakeLists.txt' -o -name '*.in' \) \
        -not -path 'tests/data/*' -not -path 'tests/fuzz/corpus/*' -not -path "$self" -print0 |
        sort -z | xargs -0 awk '
        FNR == 1 { doc = "" }
        {
            line = $0
            prefix = FILENAME ":" FNR "\t"
            while (line != "") {
                # A document name: a path that ends in the Markdown suffix.
                d = match(line, /[A-Za-z0-9_.\/-]*[A-Za-z0-9_-]\.md/)
                ds = RSTART; dl = RLENGTH
                s = match(line, /§[0-9]+(\.[0-9]+)*[a-z]?/)
                ss = RSTART; sl = RLENGTH
                if (!d && !s) break
                if (d && (!s || ds < ss)) {
                    # Not a citation: part of a longer name (an .mdx suffix) or of a URL.
                    if (substr(line, ds + dl, 1) ~ /[A-Za-z0-9_]/ ||
                        index(substr(line, ds, dl), "//") || substr(line, ds - 1, 1) == ":") {
                        line = substr(line, ds + dl)
                        continue
                    }
                    doc = substr(line, ds, dl)
                    sub(/^\.\//, "", doc)
                    line = substr(line, ds + dl)
                    print prefix "doc\t" doc
                    if (match(line, /^,? *"[^"]+"/)) {
                        title = substr(line, RSTART, RLENGTH)
                        sub(/^[^"]*"/, "", title)
                        sub(/"$/, "", title)
                        print prefix "title\t" doc "\t" title
                    }
                } else {
                    print prefix "section\t" doc "\t" substr(line, ss + 2, sl - 2)
                    line = substr(line, ss + sl)
                }
            }
        }'
}

# Headings of a markdown file outside code fences, one per line, as "<number><TAB><title>"
# (number empty for unnumbered headings).
headings() {
    awk '
        /^```/ { fenced = !fenced; next }
        fenced || !/^#+ / { next }
        {
            text = $0
            sub(/^#+ +/, "", text)
            number = ""
            if (match(text, /^(§)?[0-9]+(\.[0-9]+)*[a-z]?\.?( |$)/)) {
                number = substr(text, RSTART, RLENGTH)
                text = substr(text, RSTART + RLENGTH)
                sub(/^§/, "", number)
                sub(/ $/, "", number)
                sub(/\.$/, "", number)
            }
            print number "\t" text
        }' "$1"
}

failures=0
checked=0
declare -A pending_used=()
report() {
    local where=$1 doc=$2 message=$3 entry
    for entry in "${pending[@]}"; do
        if [[ "$entry" == "${where%%:*} $doc" ]]; then
            pending_used[$entry]=1
            return
        fi
    done
    echo "$where: $message"
    failures=$((failures + 1))
}

while IFS=$'\t' read -r where kind doc detail; do
    checked=$((checked + 1))
    if [[ -z "$doc" ]]; then
        report "$where" "" "§$detail follows no document citation in this file"
        continue
    fi
    if [[ ! -f "$doc" ]]; then
        # Reported once, at the document name; its sections cannot be checked.
        if [[ "$kind" == doc ]]; then
            found=$(find docs src include tests -name "${doc##*/}" -not -path "$self" | head -1)
            if [[ -n "$found" ]]; then
                report "$where" "$doc" "cites $doc, which is not there: cite it as $found"
            else
                report "$where" "$doc" "cites $doc, which is not in the repository"
            fi
        fi
        continue
    fi
    case "$kind" in
        section)
            headings "$doc" | cut -f1 | grep -qxF -- "$detail" ||
                report "$where" "$doc" "cites $doc §$detail, which has no heading numbered $detail"
            ;;
        title)
            headings "$doc" | cut -f2 | grep -qxF -- "$detail" ||
                report "$where" "$doc" "cites \"$detail\" of $doc, which has no heading of that title"
            ;;
    esac
done < <(citations)

for entry in "${pending[@]}"; do
    if [[ -z "${pending_used[$entry]:-}" ]]; then
        echo "$self: the pending exception \"$entry\" matches no citation any more: delete it"
        failures=$((failures + 1))
    fi
done

if ((failures > 0)); then
    echo "$failures broken citation(s) of $checked"
    exit 1
fi
echo "all $checked citations resolve (${#pending[@]} pending exception(s))"
