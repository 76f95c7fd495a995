# pagepipe — see README.md.
GO       ?= go
PREFIX   ?= /usr/local
BIN      := bin/pagepipe
BENCHBIN := bin/pagepipe-bench
FIXTURES ?= $(or $(PAGEPIPE_FIXTURES),$(or $(TMPDIR),/tmp)/pagepipe-fixtures)
DEMO_MIB ?= 512

FUZZTIME ?= 20s
# One fuzz worker by default: the execution count go test prints is then
# the worker's, which scripts/fuzz.sh checks.
FUZZPARALLEL ?= 1

.PHONY: build test disk-check demo bench bench-compare bench-cores bench-filter bench-rss bench-scaling bench-serial install deps fixtures lint fuzz fuzz-corpus clean

# Both static: bin/pagepipe is what a capture kernel's initramfs carries,
# bin/pagepipe-bench (the bench, gen-vmcore) stays on the developer's side.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN) ./cmd/pagepipe
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BENCHBIN) ./cmd/pagepipe-bench

deps:
	scripts/deps.sh

# make test's disk (fixture cache and e2e dumps): scripts/disk-check.sh
# prints the need in one line and stops here when the fixture cache's file
# system cannot hold it (SUITE_DISK_NEED_GIB there; PAGEPIPE_DISK_NEED_GIB
# overrides it).
disk-check:
	@scripts/disk-check.sh

# Every test, with the real judges installed first; the race detector on
# the packages with concurrency.
# (-tags lzo2 adds the cross-checks against the C liblzo2, through cgo in
# test-only code.)
# The -race pass runs the packages with concurrent code, whole: a test that
# would outlast the pass under the race detector (dump's cycles study) sits
# in a file built with `//go:build !race`. In cmd/pagepipe the race detector
# has work only where workers run at once, so it runs the tests that vary the
# workers (and the priority order, cuts and refusals that stop them), named
# by RACE_CMD; the rest of cmd/pagepipe, under the race detector, would take
# longer than the whole pass. TestRaceCmdNamesTests (cmd/pagepipe) fails
# when an alternative of RACE_CMD names no test, so a renamed test cannot
# leave the pass silently.
RACE_CMD = Workers|PriorityReordersOnlyData|SizeLimit|NoClobber|Malformed|ZlibDumpReadsBack

test: disk-check deps lint
	$(GO) test -count=1 -timeout 80m -tags lzo2,integration ./...
	$(GO) test -count=1 -race -timeout 40m -tags lzo2,integration ./pipeline/... ./codec/... ./source/... ./sink/... ./filter/... ./kernel/... ./bitmap/... ./dump/... ./internal/reorder/... ./cmd/pagepipe-bench/...
	$(GO) test -count=1 -race -timeout 20m -tags lzo2,integration -run '$(RACE_CMD)' ./cmd/pagepipe

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet -tags lzo2,integration ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags lzo2,integration ./...

# Generate a machine's memory, dump it with zlib at dump level 1, check
# every page of the dump against the source, print the statistics.
demo: build
	@mkdir -p $(FIXTURES)
	@test -s $(FIXTURES)/demo-$(DEMO_MIB).vmcore || ./$(BENCHBIN) gen-vmcore --size $(DEMO_MIB) $(FIXTURES)/demo-$(DEMO_MIB).vmcore
	./$(BIN) -f -c -d 1 --message-level 23 $(FIXTURES)/demo-$(DEMO_MIB).vmcore $(FIXTURES)/demo-$(DEMO_MIB).dump
	./$(BIN) verify $(FIXTURES)/demo-$(DEMO_MIB).vmcore $(FIXTURES)/demo-$(DEMO_MIB).dump
	./$(BIN) inspect $(FIXTURES)/demo-$(DEMO_MIB).dump

# (-tags integration: codec's benchmarks compress the real fixture's pages.)
bench:
	$(GO) test -tags integration -run '^$$' -bench . -benchtime 3x ./pipeline/ ./codec/

# pagepipe against sid's makedumpfile 1.7.8 on a real 4 GiB fixture, both on
# one CPU, medians of 5 alternating runs (docs/benchmarks.md).
bench-compare: build deps
	bench/compare.sh "$$(fixtures/make-vmcore.sh --ram 4096 | tail -n 1)/vmcore" 5

# The page scan on a generated 64 GiB machine against makedumpfile's.
bench-filter: build deps
	bench/filter64.sh 5

# The scaling study of docs/scaling.md, written into docs/scaling/: the
# real fixture against makedumpfile on one and two CPUs, and a generated
# 4 GiB 6.1 machine (cached on tmpfs) at 1 to 8 workers on one CPU.
BENCH_TMP ?= $(if $(wildcard /dev/shm),/dev/shm,$(or $(TMPDIR),/tmp))
bench-scaling: build deps
	./$(BENCHBIN) --vs makedumpfile --workers 1,2 --cpus 1,2 --codec c --dump-level 31 --runs 3 \
		--out docs/scaling/real "$$(fixtures/make-vmcore.sh | tail -n 1)/vmcore"
	./$(BENCHBIN) --gen-size 4096 --profile 6.1 --work-dir $(BENCH_TMP)/pagepipe-bench --workers 1,2,4,8 --cpus 1 \
		--codec c --dump-level 31 --runs 9 --out docs/scaling/gen4g

# The serial path on one CPU (docs/scaling.md, study 3): the real 4 GiB
# fixture at -d 31 with -l, -c and -z against sid's makedumpfile 1.7.8.
bench-serial: build deps
	./$(BENCHBIN) --vs "$$(fixtures/peer.sh makedumpfile-sid | tail -n 1)" --workers 1 --cpus 1 --codec l,c,z \
		--dump-level 31 --runs 7 --out docs/scaling/issue16 "$$(fixtures/make-vmcore.sh --ram 4096 | tail -n 1)/vmcore"

# The many-core study (docs/scaling.md, "Many cores"): the seeds' tables 001
# (1 to 16 workers on the widest CPU set) and 003 (1 to 16 CPUs, a worker
# each) for -l and -c at -d 31 and -d 1, on a kernel machine it generates
# itself, rounds until CORES_BUDGET would be passed, into CORES_OUT. It
# needs nothing but the two static binaries: where Go is, it builds them;
# on a machine without Go (or whose build fails), carry bin/ from here.
CORES_OUT    ?= docs/scaling/cores/$(shell nproc 2>/dev/null || echo 1)-cpus
CORES_BUDGET ?= 8m
CORES_ARGS   ?=
bench-cores:
	@if command -v $(GO) >/dev/null 2>&1 && $(MAKE) --no-print-directory build; then :; \
	elif test -x $(BIN) && test -x $(BENCHBIN); then echo "bench-cores: not built here: measuring the carried $(BIN) and $(BENCHBIN)"; \
	else echo "bench-cores: no $(BIN) and $(BENCHBIN), and no $(GO) to build them: run make build where Go is and carry bin/"; exit 1; fi
	$(BENCHBIN) cores --pagepipe $(BIN) --budget $(CORES_BUDGET) --out $(CORES_OUT) $(CORES_ARGS)

# Peak RSS at 4 workers on generated machines of 1 GiB to 4 TiB, default
# budget and --cyclic-buffer 8192, and the page scan beside makedumpfile's.
bench-rss: build
	bench/rss.sh

fixtures:
	fixtures/make-vmcore.sh

# Every fuzz target, each for FUZZTIME; a target also fails when it goes
# more than 10 s without an execution (scripts/fuzz.sh).
fuzz:
	@for pkg in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' $$pkg/*_test.go | cut -c6-); do \
			echo "fuzz $$pkg $$f"; \
			GO=$(GO) FUZZ_PARALLEL=$(FUZZPARALLEL) scripts/fuzz.sh $$pkg $$f $(FUZZTIME) || exit 1; \
		done; \
	done

# Rewrite the committed fuzz seed corpora (testdata/fuzz/*/seed-*) from
# their generators (each package's TestFuzzSeedCorpus; internal/fuzzcorpus).
fuzz-corpus:
	@for pkg in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u); do \
		$(GO) test -run '^TestFuzzSeedCorpus$$' ./$$pkg/ -args -update-fuzz-corpus || exit 1; \
	done

# The static binary and the man page; MAKEDUMPFILE_LINK=1 also installs
# pagepipe as makedumpfile (docs/kdump.md).
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/pagepipe
	install -D -m 0644 docs/pagepipe.8 $(DESTDIR)$(PREFIX)/share/man/man8/pagepipe.8
	@if [ "$(MAKEDUMPFILE_LINK)" = 1 ]; then \
		ln -sf pagepipe $(DESTDIR)$(PREFIX)/bin/makedumpfile; \
		echo "installed $(DESTDIR)$(PREFIX)/bin/makedumpfile -> pagepipe"; \
	fi

# pagepipe's Debian packages (docs/packaging.md): pagepipe for each of
# PKG_ARCHES, cross-built, and pagepipe-as-makedumpfile (Architecture: all),
# into DEB_OUT; and the same two as RPMs (packaging/pagepipe.spec) into
# RPM_OUT.
PKG_ARCHES ?= amd64 arm64
DEB_OUT    ?= bin/deb
RPM_OUT    ?= bin/rpm
.PHONY: deb rpm
deb:
	packaging/deb.sh --out $(DEB_OUT) $(PKG_ARCHES)

rpm:
	packaging/rpm.sh --out $(RPM_OUT) $(PKG_ARCHES)

clean:
	rm -rf bin
