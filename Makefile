# The README's two commands are `make run` and `make test`.
GO       ?= go
SQLC     ?= $(shell command -v sqlc 2>/dev/null || echo $(shell $(GO) env GOPATH)/bin/sqlc)
FUZZTIME ?= 200000x

# Every fuzz test, as package:target.
FUZZ_TARGETS = \
	./cxdbcompat:FuzzReadFrame \
	./cxdbcompat:FuzzDecodeRequest \
	./cxdbcompat:FuzzDecodeResponses \
	./cxdbcompat:FuzzDecodeTurnList \
	./store/blobpack:FuzzDecodeRecord \
	./store/turnlog:FuzzUnmarshalRecord

.PHONY: run test lint unit fuzz sqlc sqlc-check bench build

# Run the server (embedded Postgres in ./data unless CARDBOX_DATABASE_URL is set).
run:
	$(GO) run ./cmd/cardboxd

# Every test: format and vet, all tests with the race detector against real
# Postgres and real files, each fuzz test briefly, and the sqlc check.
test: lint unit fuzz sqlc-check

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

# Regenerate sqlc/db from sqlc/queries and migrations/.
sqlc:
	cd sqlc && $(SQLC) generate

# Fails when the committed generated code is not what sqlc generates.
sqlc-check:
	@if [ -x "$(SQLC)" ]; then cd sqlc && $(SQLC) diff && echo "sqlc: generated code is current"; \
	else echo "sqlc not installed (go install github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1): skipping the generated-code check"; fi

build:
	$(GO) build -o bin/ ./cmd/...

# The turn store benchmark against a running server (see docs/performance.md).
bench:
	$(GO) run ./cmd/cardbox bench
