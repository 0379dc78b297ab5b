// Module officialtree checks that sdk/fstree writes the same tree bytes
// as the official CXDB Go client. It is a module of its own so that the
// client, which the Go module proxy does not serve, is needed only here;
// sdk/fstree's TestTreeBytesMatchOfficialClient runs it with the client
// from CARDBOX_SHARED_DIR (../shared beside the repository by default).
module github.com/cardboxhq/cardbox/sdk/internal/officialtree

go 1.26.8

require (
	github.com/cardboxhq/cardbox/sdk v0.0.0
	github.com/strongdm/ai-cxdb/clients/go v0.0.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	github.com/zeebo/blake3 v0.2.4 // indirect
)

replace github.com/cardboxhq/cardbox/sdk => ../..

replace github.com/strongdm/ai-cxdb/clients/go => ../../../../shared/vendor/cxdb-go-client
