module github.com/cardboxhq/cardbox/sdk

go 1.26.8

require (
	github.com/klauspost/compress v1.20.3
	github.com/vmihailenco/msgpack/v5 v5.4.1
	github.com/zeebo/blake3 v0.2.4
)

require (
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
