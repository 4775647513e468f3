# eatt: two commands a user needs (README Quick start): `make flow` and `make test`.
# Both set up .venv on their own; `make install` is idempotent (re-runs only when the
# dependency files change).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install debian flow test lint format bench clean

install: $(STAMP) $(VENV)/debian/.installed

# zigzag-dse: only for the CACTI 7 it bundles (eatt power prices the folded engine's memory
# macros with it, rtl_sim/memory_energy.py); without its dependencies (nothing of it is
# imported). Where it cannot be installed, eatt power falls back to Horowitz's table.
ZIGZAG := zigzag-dse==3.9.1

$(STAMP): pyproject.toml constraints.txt Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c constraints.txt -e '.[dev]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps '$(ZIGZAG)' \
		|| echo "make: pip install $(ZIGZAG) failed: eatt power prices memories by Horowitz's table" >&2
	@touch $(STAMP)

# Debian's OpenSTA and the OSU 0.18 um standard cells (Liberty) for `eatt power`, and Icarus
# Verilog (iverilog 11: the second simulator, and eatt power's gate-level simulation), unpacked
# into .venv/debian with `apt-get download` + `dpkg -x` (no root, the system untouched).
# .venv/debian/bin gets iverilog and vvp wrappers that point them at their unpacked libraries
# (-B, -M); eatt.rtl_sim.tools.use_local_icarus puts that folder on PATH where no iverilog is.
# trans-de-en: the Ding German-English dictionary, the real-language task's corpus
# (.venv/debian/usr/share/trans/de-en; eatt.model.ding, docs/models.md "The Ding task").
# Optional: ccache (and its libhiredis, a Debian 12 name): Verilator's OBJCACHE
# (eatt.rtl_sim.tools.verilator_env), so the Verilator and cocotb runtime files every simulation
# build compiles are compiled once; without them builds only take longer.
# Where this cannot work (no apt-get, no package lists) the commands exit 3 naming the package.
DEBIAN_PKGS := opensta qflow-tech-osu018 iverilog trans-de-en
DEBIAN_OPTIONAL := ccache libhiredis0.14
debian: $(VENV)/debian/.installed

$(VENV)/debian/.installed: Makefile
	@mkdir -p $(VENV)/debian/.deb $(VENV)/debian/bin
	@cd $(VENV)/debian/.deb && for p in $(DEBIAN_PKGS); do \
		ls $${p}_*.deb >/dev/null 2>&1 || apt-get download -q $$p >/dev/null 2>&1 \
		|| echo "make: apt-get download $$p failed: the commands that need it will say so" >&2; \
	done; for p in $(DEBIAN_OPTIONAL); do \
		ls $${p}_*.deb >/dev/null 2>&1 || apt-get download -q $$p >/dev/null 2>&1 || true; \
	done; for d in *.deb; do [ -f "$$d" ] && dpkg -x "$$d" ..; done; \
	ivl=$$(ls -d ../usr/lib/*/ivl 2>/dev/null | head -n 1); \
	if [ -n "$$ivl" ] && [ -x ../usr/bin/iverilog ]; then \
		ivl=$${ivl#../}; \
		printf '#!/bin/sh\nd="$$(cd "$$(dirname "$$0")/.." && pwd)"\nexec "$$d/usr/bin/iverilog" -B"$$d/%s" "$$@"\n' "$$ivl" > ../bin/iverilog; \
		printf '#!/bin/sh\nd="$$(cd "$$(dirname "$$0")/.." && pwd)"\nexec "$$d/usr/bin/vvp" -M"$$d/%s" "$$@"\n' "$$ivl" > ../bin/vvp; \
		chmod +x ../bin/iverilog ../bin/vvp; \
	fi; \
	if [ -x ../usr/bin/ccache ]; then \
		lib=$$(dirname "$$(ls ../usr/lib/*/libhiredis.so.* 2>/dev/null | head -n 1)"); lib=$${lib#../}; \
		printf '#!/bin/sh\nd="$$(cd "$$(dirname "$$0")/.." && pwd)"\nLD_LIBRARY_PATH="$$d/%s$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}" exec "$$d/usr/bin/ccache" "$$@"\n' "$$lib" > ../bin/ccache; \
		chmod +x ../bin/ccache; \
	fi; \
	ls $(foreach p,$(DEBIAN_PKGS),$(p)_*.deb) >/dev/null 2>&1 && touch ../.installed || true

flow: install
	$(BIN)/eatt flow

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# two pytest-xdist workers, one test file each at a time (--dist loadfile: a file's module-scoped
# builds happen once), the slowest files first (tests/conftest.py SLOW_FILES; no reorder by test
# count); `$(BIN)/python -m pytest` alone runs serially
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python bench/attention_cpu.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
