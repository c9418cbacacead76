#!/usr/bin/env bash
# Puts the `constellation` command on PATH, as `npm install -g` does for a package's bin: a symlink to this
# checkout's bin/constellation in /usr/local/bin (as root) or ~/.local/bin (other users), and says where.
# A file there that is not a symlink is left alone (it is not ours). Part of `npm run setup`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$repo/bin/constellation"
if [ "$(id -u)" -eq 0 ]; then dir=/usr/local/bin; else dir="${HOME}/.local/bin"; fi
link="$dir/constellation"
if [ -e "$link" ] && [ ! -L "$link" ]; then
  echo "Left $link alone (it is not a symlink of ours); run $target instead." >&2
  exit 0
fi
mkdir -p "$dir"
ln -sfn "$target" "$link"
echo "The constellation command is on PATH: $link -> $target"
case ":${PATH}:" in
  *":$dir:"*) ;;
  *) echo "Add $dir to your PATH (export PATH=\"$dir:\$PATH\") to run it as \`constellation\`." ;;
esac
