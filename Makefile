# attnsvm: the two commands a reader needs are `make book` and `make test`.
#
#   make setup      create .venv and install the pinned toolchain + attnsvm (editable), once
#   make book       execute every chapter and build the HTML book into _build/html (strict: -W)
#   make test       library unit tests + every chapter notebook through nbval, on 2 workers
#   make notebooks  export every chapter to .ipynb under _build/html/_notebooks/
#   make serve      serve _build/html on http://127.0.0.1:8000/ (PORT=...); search shows snippets there
#   make student    student edition: every chapter as .ipynb without solutions, in _build/student/
#   make slides     the lecture core of every chapter as an offline reveal.js deck, _build/slides/
#   make pdf        the whole book as one PDF, _build/pdf/attnsvm.pdf (needs Chromium, no TeX)
#   make bench      run every bench/*.py
#   make gpu-check  CUDA vs CPU from one seed (solvers, train, path), then heavy studies timed on both
#                   (tools/gpu_check.py; GPUCHECKFLAGS=--quick for small sizes; no CUDA: one line, exit 0)
#   make portability  every chapter under 5 arithmetic environments (OpenBLAS kernel, ATen vectors,
#                   MKL_CBWR, 1 or 2 threads); exit 1 if a claim's status or a cell's verdict changes
#                   (tools/portability.py; PORTABILITYFLAGS="--env native haswell-avx2", --chapters ...)
#   make clean      remove build products (keeps .venv; `make distclean` removes it too)
#
# Each chapter is executed once per change: `make test` and `make book` share the execution cache
# _build/.jupyter_cache, emptied when the library, requirements.txt or ATTNSVM_SCALE change
# (tools/notebook_cache.py); `make clean` empties it too. BOOKFLAGS=--all makes Sphinx re-read every page.
# ATTNSVM_SCALE=quick (book, test, pdf, portability) runs the experiments at a smaller scale; default:
# the paper's.

SHELL  := /bin/bash
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp
NB_DIR := _build/html/_notebooks
STUDENT_DIR := _build/student
PDF    := _build/pdf/attnsvm.pdf
PAPER  ?= letter
BOOKFLAGS ?=
# kernels (chapters) executed at a time by `make test` and `make book`
JOBS   ?= 2
PORT   ?= 8000
# The browser that prints the PDF: the first of these on PATH, or CHROMIUM=/path/to/chrome.
CHROMIUM ?= $(firstword $(foreach b,chromium chromium-browser google-chrome-stable google-chrome,$(shell command -v $(b) 2>/dev/null)))

# Chapters = the text notebooks of book/ (a jupytext front matter with a kernelspec).
CHAPTERS = $(shell grep -l '^kernelspec:' book/*.md 2>/dev/null)

.PHONY: setup book test notebooks serve slides student pdf bench gpu-check portability clean distclean

setup: $(STAMP)

# One pip call for everything (torch is pinned in requirements.txt, never installed unpinned).
# The python3 kernel spec goes into the venv prefix so that nbval and the book's executor start
# the venv's python on any machine.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -r requirements.txt -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (attnsvm)"
	touch $@

# One thread per kernel (as in `make test`): the chapters' tiny models gain nothing from more, and
# two kernels at a time on two cores would otherwise oversubscribe them. tools/execute_chapters.py
# executes the chapters the execution cache lacks, JOBS at a time; Sphinx then renders them.
book: setup
	OMP_NUM_THREADS=1 $(PY) tools/execute_chapters.py --jobs $(JOBS) $(CHAPTERS)
	OMP_NUM_THREADS=1 $(VENV)/bin/jupyter-book build -W -n --keep-going $(BOOKFLAGS) .
	$(PY) tools/student_edition.py --index --output _build/html/student
	$(PY) tools/slides.py --output _build/html/slides --mathjax-url ../_static/mathjax/tex-mml-chtml.js
	$(MAKE) --no-print-directory notebooks
	@echo "Book: file://$(CURDIR)/_build/html/index.html  (notebooks: $(NB_DIR)/)"

# Each chapter that passes is stored in the book's execution cache (tests/site/nbval_md.py), so that a
# `make book` afterwards does not execute it again. The cell timeout only guards against a hang.
test: setup
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(PY) -m pytest -n $(JOBS) --dist loadfile --nbval-lax \
	  --nbval-cell-timeout=3600 tests book

notebooks: setup
	mkdir -p $(NB_DIR)
	for f in $(CHAPTERS); do \
	  $(VENV)/bin/jupytext --quiet --to ipynb -o $(NB_DIR)/$$(basename $${f%.md}).ipynb $$f || exit 1; \
	done

# The offline search shows result snippets only over http (browsers block them from file://).
serve:
	@test -f _build/html/index.html || { echo "make serve: _build/html does not exist yet; run make book first" >&2; exit 1; }
	@echo "Serving _build/html at http://127.0.0.1:$(PORT)/ (Ctrl-C stops it)"
	python3 -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

# Slides of each chapter's lecture core (reveal.js, offline), in _build/slides/ (tools/slides.py).
slides: setup
	OMP_NUM_THREADS=1 $(PY) tools/execute_chapters.py --jobs $(JOBS) $(CHAPTERS)
	rm -rf _build/slides
	$(PY) tools/slides.py --output _build/slides
	@echo "Slides: file://$(CURDIR)/_build/slides/index.html"

student: setup
	OMP_NUM_THREADS=1 $(PY) tools/execute_chapters.py --jobs $(JOBS) $(CHAPTERS)
	rm -rf $(STUDENT_DIR)
	$(PY) tools/student_edition.py --output $(STUDENT_DIR)

# One HTML page for the whole book (chapters executed, strict, as in `make book`), printed to PDF
# by headless Chromium once MathJax has typeset it (tools/print_pdf.py). See README: "PDF".
pdf:
	@test -n "$(CHROMIUM)" || { echo "make pdf: Chromium not found; it prints the book to PDF. Install it (Debian/Ubuntu: sudo apt-get install chromium) or name it: make pdf CHROMIUM=/path/to/chrome" >&2; exit 1; }
	$(MAKE) --no-print-directory setup
	OMP_NUM_THREADS=1 $(PY) tools/execute_chapters.py --jobs $(JOBS) $(CHAPTERS)
	OMP_NUM_THREADS=1 $(VENV)/bin/jupyter-book build -W -n --keep-going --builder singlehtml $(BOOKFLAGS) .
	$(PY) tools/print_pdf.py --chromium "$(CHROMIUM)" --paper $(PAPER) _build/singlehtml/index.html $(PDF)

bench: setup
	for f in bench/*.py; do \
	  [ -e "$$f" ] || continue; echo "== $$f"; MPLBACKEND=Agg $(PY) $$f || exit 1; \
	done

gpu-check: setup
	$(PY) tools/gpu_check.py $(GPUCHECKFLAGS)

# Each environment sets its own threads (and jobs: 2 kernels of 1 thread, or 1 of 2), and ATTNSVM_SCALE
# passes through; results go to _build/portability/, never to the book's execution cache.
portability: setup
	ATTNSVM_SCALE=$(ATTNSVM_SCALE) $(PY) tools/portability.py $(PORTABILITYFLAGS)

clean:
	rm -rf _build .pytest_cache .jupyter_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
