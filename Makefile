# pagepipe — see README.md.
GO       ?= go
PREFIX   ?= /usr/local
BIN      := bin/pagepipe
FIXTURES ?= $(or $(PAGEPIPE_FIXTURES),$(or $(TMPDIR),/tmp)/pagepipe-fixtures)
DEMO_MIB ?= 512

.PHONY: build test demo bench install deps fixtures lint fuzz clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/pagepipe

deps:
	scripts/deps.sh

# Every test, with the real judges installed first; the race detector on
# the packages with concurrency.
test: deps lint
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race -tags lzo2 ./pipeline/... ./codec/... ./source/... ./sink/... ./filter/...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# Generate a machine's memory, dump it with zlib at dump level 1, check
# every page of the dump against the source, print the statistics.
demo: build
	@mkdir -p $(FIXTURES)
	@test -s $(FIXTURES)/demo-$(DEMO_MIB).vmcore || ./$(BIN) gen-vmcore --size $(DEMO_MIB) $(FIXTURES)/demo-$(DEMO_MIB).vmcore
	./$(BIN) -f -c -d 1 --message-level 23 $(FIXTURES)/demo-$(DEMO_MIB).vmcore $(FIXTURES)/demo-$(DEMO_MIB).dump
	./$(BIN) verify $(FIXTURES)/demo-$(DEMO_MIB).vmcore $(FIXTURES)/demo-$(DEMO_MIB).dump
	./$(BIN) inspect $(FIXTURES)/demo-$(DEMO_MIB).dump

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./pipeline/ ./codec/

fixtures:
	fixtures/make-vmcore.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseELF -fuzztime 30s ./source/

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/pagepipe

clean:
	rm -rf bin
