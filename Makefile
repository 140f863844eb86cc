# attnsvm: the two commands a reader needs are `make book` and `make test`.
#
#   make setup      create .venv and install the pinned toolchain + attnsvm (editable), once
#   make book       execute every chapter and build the HTML book into _build/html (strict: -W)
#   make test       library unit tests + every chapter notebook through nbval, on 2 workers
#   make notebooks  export every chapter to .ipynb under _build/html/_notebooks/
#   make bench      run every bench/*.py
#   make clean      remove build products (keeps .venv; `make distclean` removes it too)
#
# BOOKFLAGS=--all forces Sphinx to re-read (and so re-execute) every page, e.g. after a library change.

SHELL  := /bin/bash
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp
NB_DIR := _build/html/_notebooks
BOOKFLAGS ?=

# Chapters = the text notebooks of book/ (a jupytext front matter with a kernelspec).
CHAPTERS = $(shell grep -l '^kernelspec:' book/*.md 2>/dev/null)

.PHONY: setup book test notebooks bench clean distclean

setup: $(STAMP)

# One pip call for everything (torch is pinned in requirements.txt, never installed unpinned).
# The python3 kernel spec goes into the venv prefix so that nbval and the book's executor start
# the venv's python on any machine.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -r requirements.txt -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (attnsvm)"
	touch $@

book: setup
	$(VENV)/bin/jupyter-book build -W -n --keep-going $(BOOKFLAGS) .
	$(MAKE) --no-print-directory notebooks
	@echo "Book: file://$(CURDIR)/_build/html/index.html  (notebooks: $(NB_DIR)/)"

test: setup
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(PY) -m pytest -n 2 --dist loadfile --nbval-lax tests book

notebooks: setup
	mkdir -p $(NB_DIR)
	for f in $(CHAPTERS); do \
	  $(VENV)/bin/jupytext --quiet --to ipynb -o $(NB_DIR)/$$(basename $${f%.md}).ipynb $$f || exit 1; \
	done

bench: setup
	for f in bench/*.py; do \
	  [ -e "$$f" ] || continue; echo "== $$f"; MPLBACKEND=Agg $(PY) $$f || exit 1; \
	done

clean:
	rm -rf _build .pytest_cache .jupyter_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
