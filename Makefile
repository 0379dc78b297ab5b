# Everyday targets. The README's two commands (run, test) need none of these.
GO ?= go
SQLC ?= $(shell go env GOPATH)/bin/sqlc

.PHONY: run test sqlc sqlc-check fuzz bench lint

run:
	$(GO) run ./cmd/cardboxd

test:
	./.ci/test

# Regenerate sqlc/db from sqlc/queries and migrations/.
sqlc:
	cd sqlc && $(SQLC) generate

# Fails when the committed generated code is stale (needs sqlc installed:
# go install github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1).
sqlc-check:
	cd sqlc && $(SQLC) diff

lint:
	gofmt -l . | (! grep .) && $(GO) vet ./...
