#!/usr/bin/env bash
# Regenerates reachctl's man page and shell completions from its argument
# parser, and the D-Bus API's man page from the contract's comments
# (docs/dbus-man.py). Run it after changing reachctl's commands or help or
# dbus/*.xml; tests check that the committed files match their sources.
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
# The sections the plugin does not write (EXIT STATUS as reachctl means it, FILES, SEE ALSO).
docs/man-sections.py docs/man/reachctl.1
# The D-Bus API's page, from the contract's comments.
docs/dbus-man.py
echo "docs: man pages and completions regenerated"
