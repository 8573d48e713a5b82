#!/usr/bin/env bash
# Installs Debian's Chromium for the dashboard's browser tests when /usr/bin/chromium is missing.
# Nothing downloads a browser of its own: playwright-core drives this system binary.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
if $SUDO apt-get install -y -qq chromium >/dev/null 2>&1; then
  echo "glidemq: installed $(chromium --version 2>/dev/null | head -1)" >&2
  exit 0
fi
echo "glidemq: Chromium could not be installed (apt-get install chromium); the browser tests will fail and say so" >&2
