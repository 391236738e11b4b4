# Two commands a new user needs: `make demo` (the main job) and `make test` (the tests).
# `.venv` holds all three distributions of this checkout, editable: auto-runtime (runtime/),
# auto (the compiler and CLI, with the extras its tests exercise: postgres, interchange,
# distributed) and auto-bench (bench/, adds `auto bench`); `.venv-runtime` holds the runtime
# alone, as a deploy host installs it. `make test` starts a PostgreSQL server for the store's
# tests when AUTO_TEST_POSTGRES names none (.ci/postgres.sh; AUTO_TEST_POSTGRES=none skips them).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RT_VENV := .venv-runtime
OUT ?= out/triage

.PHONY: demo test test-compiler test-runtime test-bench test-wheels install clean

$(VENV)/.installed: pyproject.toml runtime/pyproject.toml bench/pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e runtime -e ".[test,postgres,interchange,distributed]" -e bench > $(VENV)/install.log 2>&1 || (cat $(VENV)/install.log; exit 1)
	touch $@

# The runtime alone, as a deploy host installs it: wasmtime + numpy (+ pytest and hypothesis to test it).
$(RT_VENV)/.installed: runtime/pyproject.toml
	$(PY) -m venv $(RT_VENV)
	$(RT_VENV)/bin/python -m pip install -q --upgrade pip
	$(RT_VENV)/bin/python -m pip install -q "./runtime[test]" > $(RT_VENV)/install.log 2>&1 || (cat $(RT_VENV)/install.log; exit 1)
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	@mkdir -p $(OUT)
	$(BIN)/auto bench run triage --out $(OUT) > $(OUT)/stdout.json

test: test-runtime test-compiler test-bench test-wheels

# The PostgreSQL store's tests need a server: AUTO_TEST_POSTGRES names one, else .ci/postgres.sh
# installs PostgreSQL (Debian, as root) when missing and starts a throwaway one on loopback;
# AUTO_TEST_POSTGRES=none skips those tests.
test-compiler: $(VENV)/.installed
	@dsn="$${AUTO_TEST_POSTGRES:-}"; \
	if [ -z "$$dsn" ]; then \
	  dsn="$$(bash .ci/postgres.sh)" || { echo "make test: could not start PostgreSQL for the store tests (.ci/postgres.sh needs root to install and run it); set AUTO_TEST_POSTGRES to a server's URI, or AUTO_TEST_POSTGRES=none to skip those tests" >&2; exit 1; }; \
	fi; \
	AUTO_TEST_POSTGRES="$$dsn" $(BIN)/python -m pytest -q tests

test-bench: $(VENV)/.installed
	$(BIN)/python -m pytest -q bench/tests

# The distributions as users get them: wheels built from clean copies of the sources, installed
# non-editable into a fresh virtual environment (dependencies from PyPI), then `auto --help`, every
# bench family recorded and censused, and the kernel-tuning replay, run outside the checkout
# (.ci/wheel_install.sh; it prints how long each part took).
test-wheels:
	PY=$(PY) bash .ci/wheel_install.sh

test-runtime: $(RT_VENV)/.installed
	cd runtime && ../$(RT_VENV)/bin/python -m pytest -q tests

clean:
	rm -rf $(VENV) $(RT_VENV) out build *.egg-info runtime/build runtime/*.egg-info bench/build bench/*.egg-info
