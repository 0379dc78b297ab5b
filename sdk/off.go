package sdk

import "context"

// Disabled returns the Store of persistence mode Off: writes are not
// sent and succeed with empty ids, reads answer empty, nothing fails.
// Runtimes keep one code path for both modes.
func Disabled() Store { return disabled{} }

type disabled struct{}

func (disabled) CreateContext(context.Context, TurnID) (ContextHead, error) {
	return ContextHead{}, nil
}

func (disabled) ForkContext(context.Context, TurnID) (ContextHead, error) {
	return ContextHead{}, nil
}

func (disabled) AppendTurn(_ context.Context, req AppendRequest) (StoredTurn, error) {
	return StoredTurn{ContextID: req.ContextID, TypeID: req.TypeID, TypeVersion: req.TypeVersion}, nil
}

func (disabled) Head(_ context.Context, id ContextID) (ContextHead, error) {
	return ContextHead{ContextID: id}, nil
}

func (disabled) Last(context.Context, ContextID, int, bool) ([]StoredTurn, error) { return nil, nil }

func (disabled) ListTurns(context.Context, ContextID, TurnID, int) ([]StoredTurn, error) {
	return nil, nil
}

func (disabled) PublishBundle(context.Context, string, []byte) error { return nil }

func (disabled) Bundle(context.Context, string) ([]byte, error) { return nil, nil }

func (disabled) PutBlob(_ context.Context, data []byte) (BlobHash, error) { return HashOf(data), nil }

func (disabled) GetBlob(context.Context, BlobHash) ([]byte, error) { return nil, nil }

func (disabled) MissingBlobs(context.Context, []BlobHash) ([]BlobHash, error) { return nil, nil }

func (disabled) AttachFS(context.Context, TurnID, BlobHash) error { return nil }

func (disabled) Close() error { return nil }
