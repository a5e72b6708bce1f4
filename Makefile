# pktsim: `make run` installs everything into .venv and runs the bundled example;
# `make test` runs every test. Both work on a fresh machine with Python 3.10+ and a Rust
# toolchain (cargo).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export PATH := $(HOME)/.cargo/bin:$(PATH)
SOURCES := $(shell find crates python -type f \( -name '*.rs' -o -name '*.py' -o -name '*.toml' \) 2>/dev/null) Cargo.toml pyproject.toml

.PHONY: run install testbed-tools browser wheel test test-rust test-python fuzz lint bench clean

run: install
	$(VENV)/bin/pktsim model examples/linux-router-64B.toml

# The Cargo profile of the extension and of pktsim-tb: `release` (thin LTO) for `make run`
# and `make install`; `make test` builds with `test-release` (the same optimisation, no LTO),
# and its Rust tests reuse that build (see test-rust).
PROFILE ?= release

install: $(VENV)/.installed-$(PROFILE) testbed-tools

$(VENV)/.installed-$(PROFILE): $(SOURCES)
	@command -v cargo >/dev/null || { echo "pktsim needs a Rust toolchain (cargo); install it with rustup" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.5,<2"
	$(PY) -m pip install -q --no-compile "numpy>=1.24" "pandas>=2.0" "matplotlib>=3.6" "pyarrow>=12" "pytest>=7,<9.2" "pytest-xdist>=3.5" "jsonschema>=4" "dask[distributed]>=2023.1" "tqdm>=4.60" "optuna>=3.6" "scipy>=1.10" "tomli-w>=1.0" "nbclient>=0.8" "ipykernel>=6" "ruff>=0.8"
	@# The libraries' bytecode, compiled on both CPUs (pip compiles one file at a time: 48 s of
	@# a fresh install's 87 s here, 29 s this way); a file that does not compile on this Python
	@# is one its package never imports here, as pip leaves it too.
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null || true
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --profile $(PROFILE) --quiet
	$(PY) -m compileall -q python/pktsim  # bytecode, as `pip install` leaves it: `pktsim` starts ~15 ms sooner
	cargo build --profile $(PROFILE) --quiet -p pktsim-testbed
	install -m 755 target/$(PROFILE)/pktsim-tb $(VENV)/bin/pktsim-tb
	@rm -f $(VENV)/.installed $(VENV)/.installed-*
	@touch $@

# `pktsim testbed` (root only) drives iproute2, ethtool, nftables and perf (Debian's packages).
testbed-tools:
	@if [ "$$(id -u)" = 0 ] && ! { command -v nft && command -v ethtool && command -v ip && command -v perf; } >/dev/null 2>&1; then \
	  echo "installing iproute2, ethtool, nftables and linux-perf with apt-get (root): pktsim testbed builds network namespaces, sets NIC and NAPI knobs, adds nftables rules and counts napi_poll with perf"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 ethtool nftables linux-perf >/dev/null) \
	  || echo "could not install iproute2/ethtool/nftables/linux-perf; pktsim testbed will say what is missing"; fi

test:
	@$(MAKE) --no-print-directory PROFILE=test-release install browser wheel test-rust test-python

# The wheel `pip install` takes, from the build `install` made (the same profile: nothing is
# compiled again); tests/test_packaging.py installs it into a fresh venv.
wheel: install
	@rm -rf target/wheels-$(PROFILE)
	$(VENV)/bin/maturin build --profile $(PROFILE) --quiet --interpreter $(PY) --out target/wheels-$(PROFILE)

# The report test renders the HTML report in headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "could not install chromium; the report test will say so"; \
	  else echo "chromium is missing (apt-get install chromium as root); the report test needs it"; fi; }

# The Rust tree formatted as rustfmt.toml says; the unit tests in the dev profile (fast to
# build, and arithmetic overflow panics there); the integration tests, which simulate for
# seconds, with Cargo.toml's `test-release` profile, sharing the extension's build: naming
# pktsim-py with the tested crates gives their dependencies the features the extension's
# build gave them, so nothing is built twice. Then every speed case and bundled file once,
# briefly: a case the scenarios no longer accept fails here, not in the next `make bench`.
CRATES := -p pktsim-core -p pktsim-testbed -p pktsim-py
test-rust:
	cargo fmt --all --check
	cargo test -p pktsim-core -p pktsim-testbed --lib --bins
	cargo test $(CRATES) --profile test-release --test '*'
	PKTSIM_BENCH_SMOKE=1 cargo bench $(CRATES) --bench engine --quiet --profile test-release

# (pytest < 9.2: 9.2 names a test by a structured id, and pytest-xdist 3.8's loadgroup, which
# appends the group to the test's name, then keeps no group together: tests/conftest.py's
# built_once fails if that happens.)
# Two passes: every test not marked `serial` spread over the CPUs (pytest-xdist), then the
# `serial` ones alone (they measure the real kernel or hold a wall-clock bound:
# tests/conftest.py says which).
test-python: install
	$(VENV)/bin/pytest -q -n auto --dist loadgroup -m "not serial"
	$(VENV)/bin/pytest -q -m serial

# The long fuzz run (not part of `make test`, which runs 3,000 cases): FUZZ_CASES mutated
# scenarios and command lines (default 100,000, about five minutes on two cores), then the
# special-file and overflow cases; docs/simulator.md records the last result.
FUZZ_CASES ?= 100000
fuzz: install
	FUZZ_CASES=$(FUZZ_CASES) $(VENV)/bin/pytest -q -s tests/test_fuzz.py tests/test_special_files.py

# Clippy over every crate and target, warnings as errors (not part of `make test`: a newer
# clippy brings new lints).
lint:
	cargo clippy --workspace --all-targets --release -- -D warnings

# Speed figures (not a test): simulated packets per wall-clock second, then the Python
# side's goals (start-up, sweep overhead per point, post-processing, peak RSS; about 30 s,
# `$(PY) benchmarks/speed.py --points 10000` for the full sweep figure); see BENCHMARKS.md.
bench:
	cargo bench -p pktsim-core --bench engine
	$(MAKE) --no-print-directory install && $(PY) benchmarks/speed.py

clean:
	rm -rf $(VENV) target
