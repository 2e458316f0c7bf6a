#!/usr/bin/env bash
# Regenerates reachctl's man page and shell completions from its argument
# parser (run after changing reachctl's commands or help; a test checks that
# the committed files match the parser).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product reachctl
bin=$(swift build --show-bin-path)
for shell in bash zsh fish; do
    "$bin/reachctl" --generate-completion-script "$shell" > "docs/completions/reachctl.$shell"
done
swift package --allow-writing-to-package-directory generate-manual \
    --date 2026-11-22 --authors "reachabilityd contributors"
cp .build/plugins/GenerateManual/outputs/reachctl/reachctl.1 docs/man/reachctl.1
echo "docs: man page and completions regenerated"
