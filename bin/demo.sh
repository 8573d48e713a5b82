#!/usr/bin/env bash
# The main job on the embedded default: a local durable Valkey started by `glidemq dev`, jobs
# enqueued, a worker from fixtures/processors/, the stats, and the audit of that server.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
glidemq() { node "$repo/bin/glidemq" "$@"; }
work="$(mktemp -d -t glidemq-demo-XXXXXX)"
port="${GLIDEMQ_DEMO_PORT:-$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')}"
cd "$work"
stop() { glidemq dev stop >/dev/null 2>&1 || true; rm -rf "$work"; }
trap stop EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "glidemq dev --detach --port $port   (durable baseline, data in $work/.glidemq)"
url="$(glidemq dev --detach --port "$port")"
echo "$url"
export GLIDEMQ_URL="$url"

step "enqueue: one job, a priority job, a delayed job, and 100 from NDJSON"
glidemq enqueue demo '{"hello":"world"}' --name greet
glidemq enqueue demo '{"urgent":true}' --priority 1 --name urgent
glidemq enqueue demo '{"later":true}' --delay 1s --name later
for i in $(seq 1 100); do echo "{\"n\":$i}"; done | glidemq enqueue demo --ndjson --name bulk | tail -1

step "stats before the worker"
glidemq stats demo

step "worker fixtures/processors/echo.mjs --concurrency 4 --exit-when-idle"
glidemq worker "$repo/fixtures/processors/echo.mjs" --queue demo --concurrency 4 --exit-when-idle | tail -5
echo "..."

step "stats after the worker"
glidemq stats demo
glidemq job demo 1

step "audit of that server"
glidemq audit

step "glidemq dev stop"
glidemq dev stop
