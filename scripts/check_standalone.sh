#!/usr/bin/env bash
# Fails if a tracked file points outside the repository: a clone has nothing beside it, so a
# path into the folder that sits beside the checkout on the authors' machines, or a citation of
# the design document kept there, means nothing to a reader. Run by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Outside a git checkout there is nothing to list: say so instead of passing vacuously.
git ls-files --error-unmatch README.md > /dev/null 2>&1 ||
  { echo "error: $(pwd) is not a git checkout with README.md tracked; cannot list tracked files" >&2; exit 1; }
# The pattern is assembled from pieces so that this script does not contain what it looks for
# and needs no exception for itself.
sibling='sha''red' doc='bri''ef'
pattern="\\.\\./$sibling|${doc}\\.md|\\bthe $doc\\b|\\b$doc, (section|mistake)"
if hits=$(git ls-files -z | xargs -0 grep -n -I -i -E "$pattern" 2>/dev/null); then
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
