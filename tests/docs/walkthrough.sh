#!/usr/bin/env bash
# Follows docs/extending.md's walkthroughs ("How to add a chapter", "How to add a variant")
# step by step, in a copy of the source tree: each block the document marks is written or
# inserted where it says, and each command block it marks is run, in document order. So the
# walkthrough cannot drift from what builds and passes: if a step stops working, this fails.
#
#   tests/docs/walkthrough.sh [WORKDIR]      (ctest runs it as docs.walkthrough)
#
# Markers, each on the line before a fenced code block:
#   <!-- walkthrough:file PATH -->                 the block is the whole new file PATH
#   <!-- walkthrough:insert PATH after TEXT -->    inserted after the first line containing TEXT
#   <!-- walkthrough:insert PATH before TEXT -->   inserted before it
#   <!-- walkthrough:run -->                       shell commands, run at the copy's root
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
doc="$src/docs/extending.md"
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  echo "walkthrough: $src is not a git checkout; skipped"
  exit 77
fi
work="${1:-$(mktemp -d /tmp/concurdl-walkthrough.XXXXXX)}"
mkdir -p "$work"
tree="$work/tree"
rm -rf "$tree"
mkdir -p "$tree"
# The tracked files (and untracked ones not ignored), as a fresh clone would have them.
(cd "$src" && git ls-files -co --exclude-standard -z |
   while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
   xargs -0 cp --parents -t "$tree/")

# Split the document into steps: marker line, then the fenced block that follows it.
steps=0
marker=""
block=""
in_block=0
run_step() {
  local m="$1" body="$2"
  steps=$((steps + 1))
  case "$m" in
    file\ *)
      local path="${m#file }"
      mkdir -p "$(dirname "$tree/$path")"
      printf '%s\n' "$body" > "$tree/$path"
      echo "walkthrough step $steps: wrote $path"
      ;;
    insert\ *)
      local rest="${m#insert }" path where text
      path="${rest%% *}"
      rest="${rest#* }"
      where="${rest%% *}"
      text="${rest#* }"
      local file="$tree/$path"
      [[ -f "$file" ]] || { echo "walkthrough step $steps: $path does not exist" >&2; exit 1; }
      local line
      line=$(grep -nF -- "$text" "$file" | head -1 | cut -d: -f1)
      [[ -n "$line" ]] || { echo "walkthrough step $steps: '$text' not found in $path" >&2; exit 1; }
      [[ "$where" == "after" ]] || line=$((line - 1))
      local tmp="$file.walkthrough"
      { head -n "$line" "$file"; printf '%s\n' "$body"; tail -n +"$((line + 1))" "$file"; } > "$tmp"
      mv "$tmp" "$file"
      echo "walkthrough step $steps: inserted into $path $where '$text'"
      ;;
    run)
      echo "walkthrough step $steps: running"
      printf '%s\n' "$body" | sed 's/^/  $ /'
      (cd "$tree" && bash -euo pipefail -c "$body")
      ;;
    *)
      echo "walkthrough: unknown marker '$m'" >&2
      exit 1
      ;;
  esac
}

while IFS= read -r line || [[ -n "$line" ]]; do
  if [[ $in_block -eq 1 ]]; then
    if [[ "$line" == '```'* ]]; then
      in_block=0
      run_step "$marker" "$block"
      marker=""
    else
      block+="${block:+$'\n'}$line"
    fi
    continue
  fi
  if [[ "$line" == "<!-- walkthrough:"*" -->" ]]; then
    marker="${line#<!-- walkthrough:}"
    marker="${marker% -->}"
    continue
  fi
  if [[ -n "$marker" && "$line" == '```'* ]]; then
    in_block=1
    block=""
  fi
done < "$doc"

[[ $steps -ge 5 ]] || { echo "walkthrough: only $steps steps found in $doc" >&2; exit 1; }
echo "walkthrough: all $steps steps done"
