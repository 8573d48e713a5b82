# glidemq — every target does its own setup on a fresh machine.
SHELL := /bin/bash
NPM ?= npm

.PHONY: setup deps build valkey chromium test test-unit test-integration test-cli demo bench soak clean

setup: deps valkey chromium build

deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund

valkey:
	@bash bin/install-valkey.sh

chromium:
	@bash bin/install-chromium.sh

build: deps
	$(NPM) run build

test: setup
	npx mocha

test-unit: setup
	npx mocha 'dist/test/unit/**/*.test.js'

test-integration: setup
	npx mocha 'dist/test/integration/**/*.test.js'

test-cli: setup
	npx mocha 'dist/test/cli/**/*.test.js'

demo: setup
	@bash bin/demo.sh

bench: setup
	node dist/test/bench/run.js $(BENCH_ARGS)

# The long forms of the model-based randomized test, the fuzz of every library function and the
# load run (each bounded in time), and the confirmed-writes chaos (test/load/confirm-chaos.test.ts).
soak: setup
	GLIDEMQ_SOAK=1 npx mocha --timeout 0 'dist/test/model/**/*.test.js' 'dist/test/integration/fuzz.test.js' 'dist/test/load/**/*.test.js'

clean:
	rm -rf dist
