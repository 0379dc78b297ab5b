# The README's two commands are `make run` and `make test`.
SHELL    := /bin/bash
GO       ?= go
SQLC     ?= $(shell command -v sqlc 2>/dev/null || echo $(shell $(GO) env GOPATH)/bin/sqlc)
FUZZTIME ?= 200000x
GOLANGCI_VERSION := v2.15.0
GOLANGCI_LINT    ?= $(shell $(GO) env GOPATH)/bin/golangci-lint

# Every fuzz test, as package:target[:fuzztime] (default FUZZTIME); a
# target that drives a live server over TCP, or checks each input against
# a slow oracle (projection: every descriptor and render option against
# vmihailenco/msgpack), runs fewer inputs.
FUZZ_TARGETS = \
	./api/internal/jsonbody:FuzzScanIDList \
	./api/cardboxhttp:FuzzCheckBody \
	./api/cxdbhttp:FuzzDecodeStrictBody \
	./internal/appendjson:FuzzStringLen \
	./cardbox/layout:FuzzEntryCursor:20000x \
	./cardbox/rules:FuzzContentHash:20000x \
	./cardbox/position:FuzzBetween \
	./cxdbcompat:FuzzReadFrame \
	./cxdbcompat:FuzzDecodeRequest \
	./cxdbcompat:FuzzDecodeResponses \
	./cxdbcompat:FuzzDecodeTurnList \
	./cxdbcompat/fstree:FuzzDecode \
	./cxdbcompat/cql:FuzzParse \
	./cxdbcompat/ctxmeta:FuzzExtract \
	./cxdbcompat/msgpackread:FuzzReader \
	./cxdbcompat/projection:FuzzProject:50000x \
	./cxdbcompat/registry:FuzzParse \
	./cxdbcompat/typedjson:FuzzEncode \
	./cxdbcompat/server:FuzzServerConn:3000x \
	./store/blobpack:FuzzDecodeRecord \
	./store/turnlog:FuzzUnmarshalRecord \
	./store/segment:FuzzParse

# The shared material beside the repository (fixtures, the official CXDB
# client); CARDBOX_SHARED_DIR says where it is when it is not ../shared.
SHARED_DIR ?= $(or $(CARDBOX_SHARED_DIR),$(abspath ../shared))

.PHONY: run test lint golangci-lint unit fuzz fuzz-check sqlc sqlc-check bench build interop sdk

# Run the server (embedded Postgres in ./data unless CARDBOX_DATABASE_URL is
# set); flags go in ARGS, e.g. make run ARGS='--http-addr 127.0.0.1:8080'.
# The binary is built first and run directly, so Ctrl-C reaches cardboxd
# alone and `make run` exits with its status (0 after a clean shutdown).
run: build
	@exec ./bin/cardboxd $(ARGS)

# Every test: format and vet, all tests with the race detector against real
# Postgres and real files, each fuzz test briefly, and the sqlc check.
test: lint fuzz-check unit interop fuzz sqlc-check sdk

# The Go SDK (sdk/, its own module): vet, every test with the race
# detector (against a cardboxd it builds from this tree), each fuzz test
# briefly.
sdk:
	cd sdk && $(GO) vet ./... && $(GO) test -race -count=1 ./... && \
	for t in ./internal/wire:FuzzDecodeResponses ./internal/wire:FuzzReadFrame ./fstree:FuzzDecodeTree; do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*} || exit 1; done

lint: golangci-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

# golangci-lint at the version .golangci.yml is written for, installed
# into GOPATH/bin when missing or another version (a few minutes, once).
golangci-lint:
	@$(GOLANGCI_LINT) version 2>/dev/null | grep -q "version $(GOLANGCI_VERSION:v%=%) " || \
		{ echo "installing golangci-lint $(GOLANGCI_VERSION)"; $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION); }

unit:
	$(GO) test -race -count=1 ./...

# The unmodified official CXDB Go client against a real cardboxd, from its
# own module (internal/interop) with the client taken from SHARED_DIR. In
# CI a missing client fails; elsewhere it is skipped, loudly.
interop:
	@client=$(SHARED_DIR)/vendor/cxdb-go-client; \
	if [ ! -d "$$client" ]; then \
		if [ -n "$$CI" ]; then echo "interop: $$client not found (set CARDBOX_SHARED_DIR)"; exit 1; fi; \
		echo "WARNING: interop tests SKIPPED: $$client not found (set CARDBOX_SHARED_DIR)"; exit 0; \
	fi; \
	tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cp internal/interop/go.mod internal/interop/go.sum $$tmp/; \
	cd internal/interop && \
	$(GO) mod edit -modfile=$$tmp/go.mod -replace=github.com/strongdm/ai-cxdb/clients/go=$$client && \
	$(GO) test -count=1 -modfile=$$tmp/go.mod ./...

# Fails when a fuzz test exists that FUZZ_TARGETS does not list.
fuzz-check:
	@missing=0; for f in $$(grep -rlE --include='*_test.go' --exclude-dir=sdk '^func Fuzz' .); do \
		pkg=./$$(dirname $${f#./}); \
		for fn in $$(sed -nE 's/^func (Fuzz[A-Za-z0-9_]+)\(.*/\1/p' $$f); do \
			case " $(FUZZ_TARGETS) " in *" $$pkg:$$fn "*|*" $$pkg:$$fn:"*) ;; *) echo "fuzz test $$pkg:$$fn is not in FUZZ_TARGETS"; missing=1;; esac; \
		done; \
	done; exit $$missing

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg fn ft <<< "$$t"; ft=$${ft:-$(FUZZTIME)}; \
		echo "fuzz $$pkg $$fn ($$ft)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $$ft $$pkg; \
	done

# sqlc generates one package per owner of queries (sqlc/sqlc.yaml): from
# sqlc/queries/OWNER and migrations/ into that owner's internal/. The Go
# files it generated are those bearing its header; SQLC_GENERATED lists the
# repository's (tracked or not, but not ignored).
SQLC_HEADER    := // Code generated by sqlc. DO NOT EDIT.
SQLC_GENERATED := git ls-files -z --cached --others --exclude-standard -- '*.go' | xargs -0r grep -lxF '$(SQLC_HEADER)' --

# Regenerate every owner's package; a file of a query file since moved or
# removed is removed with it.
sqlc:
	$(SQLC_GENERATED) | xargs -r rm -f
	cd sqlc && $(SQLC) generate

# Fails when the committed generated code is not what sqlc generates: a
# file that differs or is missing (sqlc diff), or one sqlc no longer
# generates, left by a query file moved or removed (found by generating
# into a scratch copy of sqlc/ and migrations/). In CI (CI set, as .ci/run
# does) a missing sqlc fails; on a developer machine the check is skipped
# with a loud warning.
sqlc-check:
	@if [ -x "$(SQLC)" ]; then \
		(cd sqlc && $(SQLC) diff) || exit 1; \
		tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
		cp -r sqlc migrations $$tmp/ && (cd $$tmp/sqlc && $(SQLC) generate) || exit 1; \
		stale=$$(comm -23 <($(SQLC_GENERATED) | sort) <(cd $$tmp && grep -rlxF --include='*.go' '$(SQLC_HEADER)' . | sed 's,^\./,,' | sort)); \
		if [ -n "$$stale" ]; then echo "sqlc no longer generates these files (make sqlc removes them):"; echo "$$stale"; exit 1; fi; \
		echo "sqlc: generated code is current"; \
	elif [ -n "$$CI" ]; then echo "sqlc not installed: the generated-code check cannot run (CI)"; exit 1; \
	else echo "*** WARNING: sqlc not installed (go install github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1): the generated-code check was SKIPPED ***"; fi

build:
	$(GO) build -o bin/ ./cmd/...

# The turn store benchmark against a running server (see docs/performance.md).
bench:
	$(GO) run ./cmd/cardbox bench
