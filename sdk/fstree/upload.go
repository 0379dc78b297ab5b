package fstree

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cardboxhq/cardbox/sdk"
)

// ErrChanged: a file's content changed between Capture and Upload.
var ErrChanged = errors.New("file changed since the snapshot was captured")

// UploadStats count what an Upload sent.
type UploadStats struct {
	// Blobs is how many blobs the snapshot has; Uploaded how many the
	// server lacked and got.
	Blobs, Uploaded int
	// BytesUploaded is the bytes of those blobs.
	BytesUploaded uint64
}

// uploadBatch is how many hashes one MissingBlobs call asks about (the
// most one POST /v1/blobs/missing takes).
const uploadBatch = 10_000

// Upload stores the blobs of s that the server lacks: it asks which are
// missing (in batches), then puts those, files read from disk again and
// checked against their captured hash.
func (s *Snapshot) Upload(ctx context.Context, a sdk.Artifacts) (UploadStats, error) {
	hashes := make([]sdk.BlobHash, 0, len(s.Files)+len(s.Symlinks)+len(s.Trees))
	for h := range s.Files {
		hashes = append(hashes, h)
	}
	for h := range s.Symlinks {
		hashes = append(hashes, h)
	}
	for h := range s.Trees {
		hashes = append(hashes, h)
	}
	st := UploadStats{Blobs: len(hashes)}
	for start := 0; start < len(hashes); start += uploadBatch {
		batch := hashes[start:min(start+uploadBatch, len(hashes))]
		missing, err := a.MissingBlobs(ctx, batch)
		if err != nil {
			return st, fmt.Errorf("upload snapshot %s: %w", s.Root, err)
		}
		for _, h := range missing {
			data, err := s.blob(h)
			if err != nil {
				return st, fmt.Errorf("upload snapshot %s: %w", s.Root, err)
			}
			if _, err := a.PutBlob(ctx, data); err != nil {
				return st, fmt.Errorf("upload snapshot %s: %w", s.Root, err)
			}
			st.Uploaded++
			st.BytesUploaded += uint64(len(data))
		}
	}
	return st, nil
}

// blob returns the bytes of one of the snapshot's blobs.
func (s *Snapshot) blob(h sdk.BlobHash) ([]byte, error) {
	if b, ok := s.Trees[h]; ok {
		return b, nil
	}
	if t, ok := s.Symlinks[h]; ok {
		return []byte(t), nil
	}
	p, ok := s.Files[h]
	if !ok {
		return nil, fmt.Errorf("blob %s is not part of the snapshot", h)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if sdk.HashOf(data) != h {
		return nil, fmt.Errorf("%s: %w", p, ErrChanged)
	}
	return data, nil
}
