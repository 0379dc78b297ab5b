package fstree_test

import (
	"fmt"

	"github.com/cardboxhq/cardbox/sdk"
)

func fstreeHash(h string) sdk.BlobHash { return sdk.BlobHash(h) }

func hexOf(h [32]byte) string { return fmt.Sprintf("%x", h) }
