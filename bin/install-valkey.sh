#!/usr/bin/env bash
# Installs Valkey 8 from Debian's bookworm-backports when no valkey-server is on PATH.
# The backports entry is built from the machine's own Debian apt source, so no mirror
# address is written into this repository. Falls back to redis-server (7.0) only when
# Valkey cannot be had, and says so.
set -euo pipefail

if command -v valkey-server >/dev/null 2>&1 && command -v valkey-cli >/dev/null 2>&1; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

find_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: take the URIs of the stanza whose Suites name the plain release
    uri=$(awk '
      /^URIs:/ { u=$2 }
      /^Suites:/ { for (i=2;i<=NF;i++) if ($i=="bookworm") s=1 }
      /^$/ { if (s && u!="" && !done) { print u; done=1 } ; u=""; s=0 }
      END { if (s && u!="" && !done) print u }' "$f")
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '$1=="deb" && $0 ~ / bookworm / { for (i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) { print $i; exit } }' "$f")
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  done
  return 1
}

list=/etc/apt/sources.list.d/glidemq-backports.list
if [ ! -f "$list" ]; then
  if mirror=$(find_mirror); then
    echo "glidemq: adding bookworm-backports from the machine's Debian source" >&2
    echo "deb $mirror bookworm-backports main" | $SUDO tee "$list" >/dev/null
  else
    echo "glidemq: no Debian bookworm apt source found; cannot add backports" >&2
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
if $SUDO apt-get install -y -qq -t bookworm-backports valkey-server valkey-tools >/dev/null 2>&1 \
   || $SUDO apt-get install -y -qq valkey-server valkey-tools >/dev/null 2>&1; then
  # The package starts a system service on :6379; glidemq's tests and dev server start their own.
  $SUDO systemctl disable --now valkey-server >/dev/null 2>&1 || true
  $SUDO service valkey-server stop >/dev/null 2>&1 || true
  echo "glidemq: installed $(valkey-server --version | head -1)" >&2
  exit 0
fi

echo "glidemq: WARNING: Valkey could not be installed; falling back to redis-server 7.0" >&2
$SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
$SUDO service redis-server stop >/dev/null 2>&1 || true
echo "glidemq: using $(redis-server --version | head -1) instead of Valkey" >&2
