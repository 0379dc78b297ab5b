// Module interop proves that the unmodified official CXDB Go client works
// against cardboxd. It is a separate module so that the client, which the
// Go module proxy does not serve, is needed only here: it is taken from
// ../shared/vendor beside the repository (see README.md, Testing).
module github.com/cardboxhq/cardbox/internal/interop

go 1.26.8

require github.com/strongdm/ai-cxdb/clients/go v0.0.0

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	github.com/zeebo/blake3 v0.2.4 // indirect
)

replace github.com/strongdm/ai-cxdb/clients/go => ../../../shared/vendor/cxdb-go-client
