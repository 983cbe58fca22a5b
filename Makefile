# pocketmq: `make run` starts a name server + broker; `make test` runs every tier.
# Both set themselves up on a fresh machine (a .venv here, npm packages for the JS interop tests).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS_DIR := tests/interop/js
JS_STAMP := $(JS_DIR)/node_modules/.installed
PYTEST_ARGS ?=

.PHONY: install run test lint typecheck importlint unit integration interop spark bench clean js-deps test-deps
.PHONY: java-deps go-deps

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	$(BIN)/python -m pocketmq.deploy.devenv $(CURDIR)  # Spark in the editable venv (deploy/devenv.py)
	@touch $(STAMP)

install: $(STAMP)

$(JS_STAMP): $(JS_DIR)/package.json
	cd $(JS_DIR) && npm install --no-audit --no-fund --loglevel=error
	@touch $(JS_STAMP)

js-deps: $(JS_STAMP)

# Debian packages of the console's browser tests (chromium) and the metrics lint (promtool, in
# package prometheus), installed when missing and root; without them those tests skip and say why.
PROMETHEUS_DEB ?= prometheus=2.42.*
test-deps:
	@missing=""; command -v chromium >/dev/null || missing="chromium"; \
	command -v promtool >/dev/null || missing="$$missing $(PROMETHEUS_DEB)"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing \
	  || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $${missing//=*/} \
	  || echo "test-deps: could not install$$missing; the browser and promtool tests will skip"; \
	else echo "test-deps: not root or no apt-get; the browser and promtool tests will skip"; fi

# Java and Go interop drivers and the Apache RocketMQ 4.9.7 oracle (tests/interop/{java,go,apache}):
# pinned in their pom.xml / go.mod + go.sum; every download and build lands in the ignored .cache/.
CACHE := $(CURDIR)/.cache
MVN := mvn -q -B -Dmaven.repo.local=$(CACHE)/m2
DEP_PLUGIN := org.apache.maven.plugins:maven-dependency-plugin:3.6.1
JAVA_STAMP := $(CACHE)/java-driver/.built
APACHE_STAMP := $(CACHE)/apache/lib/.done
GO_ENV := GOMODCACHE=$(CACHE)/go/mod GOCACHE=$(CACHE)/go/build GOPATH=$(CACHE)/go GOFLAGS=-modcacherw GOTOOLCHAIN=local
GO_BIN := $(CACHE)/go-driver/godriver

$(JAVA_STAMP): tests/interop/java/pom.xml $(wildcard tests/interop/java/src/main/java/pocketmq/interop/*.java)
	$(MVN) -f tests/interop/java/pom.xml compile $(DEP_PLUGIN):copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CACHE)/java-driver/lib
	@touch $@

$(APACHE_STAMP): tests/interop/apache/pom.xml
	rm -rf $(CACHE)/apache/lib
	$(MVN) -f tests/interop/apache/pom.xml $(DEP_PLUGIN):copy-dependencies -DoutputDirectory=$(CACHE)/apache/lib
	@touch $@

java-deps: $(JAVA_STAMP) $(APACHE_STAMP)

$(GO_BIN): tests/interop/go/go.mod tests/interop/go/go.sum $(wildcard tests/interop/go/*.go)
	cd tests/interop/go && $(GO_ENV) go build -o $(GO_BIN) .

go-deps: $(GO_BIN)

run: install
	@echo "pocketmq: to use the SDK and Spark from another shell:  source $(VENV)/bin/activate  then  python your_script.py"
	$(BIN)/pocketmq up

lint: install
	$(BIN)/ruff check remoting store namesrv broker client spark deploy tests bench
	$(BIN)/ruff format --check remoting store namesrv broker client spark deploy

typecheck: install
	$(BIN)/mypy -p pocketmq.remoting -p pocketmq.store -p pocketmq.namesrv -p pocketmq.broker -p pocketmq.client -p pocketmq.spark -p pocketmq.deploy -p pocketmq.testing

importlint: install
	PYTHONPATH=.pkg $(BIN)/lint-imports

# No reruns: a flaky test is fixed, or listed in tests/conftest.py QUARANTINE with its reason
# (still run, reported as xfailed/xpassed by -rxX).
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider -rfExX

test: install js-deps test-deps java-deps go-deps lint typecheck importlint
	$(PYTEST) $(PYTEST_ARGS) tests

# the tiers (markers applied in tests/conftest.py)
unit: install
	$(PYTEST) -m "not integration and not interop and not fault and not spark" $(PYTEST_ARGS) tests

integration: install
	$(PYTEST) -m "integration and not interop and not spark" $(PYTEST_ARGS) tests

interop: install js-deps java-deps go-deps
	$(PYTEST) -m interop $(PYTEST_ARGS) tests

spark: install
	$(PYTEST) -m spark $(PYTEST_ARGS) tests

bench: install
	@for b in bench/*.py; do grep -q "__main__" $$b || continue; [ $$b = bench/soak.py ] && continue; [ $$b = bench/vs_apache.py ] && continue; echo "== $$b"; $(BIN)/python $$b || exit 1; done

# issue 23: the long forms of the fault scenarios (tests/fault/chaos.py), bounded in time, one
# table (scenario, load, faults injected, acknowledged, lost, duplicated, verdict); the soak
# (bench/soak.py, 30 min by default: SOAK_ARGS="--minutes 5")
.PHONY: chaos soak
chaos: install
	$(BIN)/python -m tests.fault.chaos

soak: install
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

# issue 25: pocketmq's broker against Apache RocketMQ 4.9.7's, interleaved (bench/vs_apache.py;
# 2 GB written before the raw-frame run: ~15 min on 2 cores; VS_APACHE_ARGS="--fill-mb 160 --segment-mb 64")
.PHONY: bench-apache
bench-apache: install java-deps
	$(BIN)/python bench/vs_apache.py $(VS_APACHE_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info $(JS_DIR)/node_modules .cache .mypy_cache .ruff_cache .pytest_cache
