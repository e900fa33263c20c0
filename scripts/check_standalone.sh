#!/usr/bin/env bash
# Fails if a tracked file points outside the repository: a clone has nothing beside it, so a
# link or path to a sibling folder (../shared and the like) or a citation of an outside design
# document means nothing to a reader. Run by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Outside a git checkout there is nothing to list: say so instead of passing vacuously.
git ls-files --error-unmatch README.md > /dev/null 2>&1 ||
  { echo "error: $(pwd) is not a git checkout with README.md tracked; cannot list tracked files" >&2; exit 1; }
pattern='\.\./shared|BRIEF\.md|\bthe brief\b|\bbrief, (section|mistake)'
# This script names the pattern itself; every other tracked file must be free of it.
if hits=$(git ls-files -z | grep -zv '^scripts/check_standalone.sh$' |
          xargs -0 grep -n -I -i -E "$pattern" 2>/dev/null); then
  echo "error: tracked files point outside the repository:" >&2
  echo "$hits" >&2
  exit 1
fi
# Markdown links that climb above the repository root.
root=$(pwd)
status=0
while IFS= read -r -d '' f; do
  dir=$(dirname "$f")
  while IFS= read -r target; do
    resolved=$(realpath -m "$dir/$target")
    case "$resolved" in
      "$root"|"$root"/*) ;;
      *) echo "error: $f links outside the repository: $target" >&2; status=1 ;;
    esac
  done < <(grep -o -E '\]\((\.\./)+[^)#]*' "$f" | sed -E 's/^\]\(//' || true)
done < <(git ls-files -z '*.md' '*.ipynb')
[ $status -eq 0 ] && echo "no tracked file points outside the repository"
exit $status
