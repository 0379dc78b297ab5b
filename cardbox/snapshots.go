package cardbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// Snapshot is a box's entries frozen at one moment: entry ids, card ids,
// zones and positions (cards are immutable, so ids are enough).
type Snapshot struct {
	BoxID      string
	SnapshotID string
	Metadata   json.RawMessage
	CreatedAt  time.Time
	// Length is the number of entries.
	Length int
	// Entries are nil in a listing.
	Entries []layout.Entry
}

// TakeSnapshot freezes a box's entries (a plain box's as its first edit
// would make them) with metadata (a JSON object or nil).
func (s *Service) TakeSnapshot(ctx context.Context, project, boxID string, metadata json.RawMessage) (Snapshot, error) {
	meta, err := boxMetadata(metadata)
	if err != nil {
		return Snapshot{}, err
	}
	box, err := s.Entries(ctx, project, boxID)
	if err != nil {
		return Snapshot{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Snapshot{}, fmt.Errorf("generate snapshot id: %w", err)
	}
	l := &layout.Layout{Entries: box.Entries}
	cards, ids, zones, positions, drafts := l.Rows()
	if err := s.admitWrite(ctx, project, idBytes(cards)+idBytes(ids)+idBytes(positions)+int64(len(meta))); err != nil {
		return Snapshot{}, err
	}
	created, err := s.as(project).InsertSnapshot(ctx, cardboxdb.InsertSnapshotParams{
		TenantID: project, BoxID: boxID, SnapshotID: id.String(), EntryIds: nonNil(ids), CardIds: nonNil(cards),
		Zones: nonNilOf(zones), Positions: nonNil(positions), Drafts: nonNilOf(drafts), Metadata: meta, Now: s.now(),
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot box %q: %w", boxID, err)
	}
	return Snapshot{BoxID: boxID, SnapshotID: id.String(), Metadata: meta, CreatedAt: created,
		Length: len(box.Entries), Entries: nonNilOf(box.Entries)}, nil
}

// Snapshots lists a live box's snapshots, oldest first, without their
// entries.
func (s *Service) Snapshots(ctx context.Context, project, boxID string) ([]Snapshot, error) {
	if _, err := s.boxLengthChecked(ctx, project, boxID); err != nil {
		return nil, err
	}
	rows, err := s.as(project).ListSnapshots(ctx, cardboxdb.ListSnapshotsParams{TenantID: project, BoxID: boxID})
	if err != nil {
		return nil, fmt.Errorf("list snapshots of box %q: %w", boxID, err)
	}
	out := make([]Snapshot, len(rows))
	for i, r := range rows {
		out[i] = Snapshot{BoxID: boxID, SnapshotID: r.SnapshotID, Metadata: r.Metadata, CreatedAt: r.CreatedAt, Length: int(r.Length)}
	}
	return out, nil
}

func (s *Service) boxLengthChecked(ctx context.Context, project, boxID string) (int, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return 0, err
	}
	return s.boxLength(ctx, project, boxID)
}

// GetSnapshot reads a snapshot of a live box with its entries.
func (s *Service) GetSnapshot(ctx context.Context, project, boxID, snapshotID string) (Snapshot, error) {
	if _, err := s.boxLengthChecked(ctx, project, boxID); err != nil {
		return Snapshot{}, err
	}
	if err := rules.ValidateID("snapshot_id", snapshotID); err != nil {
		return Snapshot{}, err
	}
	r, err := s.as(project).GetSnapshot(ctx, cardboxdb.GetSnapshotParams{TenantID: project, BoxID: boxID, SnapshotID: snapshotID})
	if isNoRows(err) {
		return Snapshot{}, rules.NotFound("snapshot", snapshotID)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("read snapshot %q: %w", snapshotID, err)
	}
	l := layout.FromRows(r.CardIds, r.EntryIds, r.Zones, r.Positions, r.Drafts, 0)
	return Snapshot{BoxID: boxID, SnapshotID: r.SnapshotID, Metadata: r.Metadata, CreatedAt: r.CreatedAt,
		Length: len(l.Entries), Entries: nonNilOf(l.Entries)}, nil
}

// DiffSnapshots compares snapshot from with snapshot to, or with the box
// as it is when to is "".
func (s *Service) DiffSnapshots(ctx context.Context, project, boxID, from, to string) (layout.Diff, error) {
	a, err := s.GetSnapshot(ctx, project, boxID, from)
	if err != nil {
		return layout.Diff{}, err
	}
	var b []layout.Entry
	if to == "" {
		box, err := s.Entries(ctx, project, boxID)
		if err != nil {
			return layout.Diff{}, err
		}
		b = box.Entries
	} else {
		snap, err := s.GetSnapshot(ctx, project, boxID, to)
		if err != nil {
			return layout.Diff{}, err
		}
		b = snap.Entries
	}
	return layout.DiffEntries(a.Entries, b), nil
}

// RestoreSnapshot sets box boxID's entries to those of snapshot
// snapshotID of box fromBoxID (boxID itself when ""). Restoring another
// box's snapshot applies it as a template: an absent box boxID is
// created, with fromBoxID as its parent. Entries whose cards were deleted
// since are restored too; assembly lists them as deleted.
func (s *Service) RestoreSnapshot(ctx context.Context, project, boxID, fromBoxID, snapshotID string) (BoxEntries, error) {
	if fromBoxID == "" {
		fromBoxID = boxID
	}
	if err := checkBoxID(project, boxID); err != nil {
		return BoxEntries{}, err
	}
	snap, err := s.GetSnapshot(ctx, project, fromBoxID, snapshotID)
	if err != nil {
		return BoxEntries{}, err
	}
	var parents []string
	if fromBoxID != boxID {
		parents = []string{fromBoxID}
	}
	return s.writeEntries(ctx, project, boxID, snap.Entries, parents)
}

// DeriveFromBox makes box boxID (created, or replaced) from box
// fromBoxID's permanent and stable entries and, with keepWorking, its
// working ones, with fromBoxID as its parent. The entries keep their ids
// and positions: carrying a card forward is carrying its id.
func (s *Service) DeriveFromBox(ctx context.Context, project, boxID, fromBoxID string, keepWorking bool) (BoxEntries, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return BoxEntries{}, err
	}
	src, err := s.Entries(ctx, project, fromBoxID)
	if err != nil {
		return BoxEntries{}, err
	}
	var kept []layout.Entry
	for _, e := range src.Entries {
		if e.Zone != layout.ZoneWorking || keepWorking {
			kept = append(kept, e)
		}
	}
	return s.writeEntries(ctx, project, boxID, kept, []string{fromBoxID})
}

// writeEntries creates box boxID, or replaces it when it exists, with
// entries; parents, when not nil, become its parent ids.
func (s *Service) writeEntries(ctx context.Context, project, boxID string, entries []layout.Entry, parents []string) (BoxEntries, error) {
	l := layout.WithEntries(entries)
	cards, _, _, _, _ := l.Rows()
	if err := s.admitWrite(ctx, project, idBytes(cards)); err != nil {
		return BoxEntries{}, err
	}
	if err := s.admit(ctx, project); err != nil {
		return BoxEntries{}, err
	}
	defer s.gate.Leave()
	var out BoxEntries
	err := s.inTx(ctx, project, func(q *cardboxdb.Queries) error {
		box, err := q.GetLiveBox(ctx, cardboxdb.GetLiveBoxParams{TenantID: project, BoxID: boxID})
		meta := []byte("{}")
		if err == nil {
			meta = box.Metadata
			if parents == nil {
				parents = box.ParentIds
			}
		} else if !isNoRows(err) {
			return fmt.Errorf("read box %q: %w", boxID, err)
		}
		if _, err := q.UpsertBox(ctx, cardboxdb.UpsertBoxParams{
			TenantID: project, BoxID: boxID, CardIds: nonNil(cards), ParentIds: nonNil(parents), Metadata: meta, Now: s.now(),
		}); err != nil {
			return fmt.Errorf("save box %q: %w", boxID, err)
		}
		if _, err := q.LockBoxEntries(ctx, cardboxdb.LockBoxEntriesParams{TenantID: project, BoxID: boxID}); err != nil {
			return fmt.Errorf("lock box %q: %w", boxID, err)
		}
		out, err = saveLayout(ctx, q, project, boxID, l, s.now())
		return err
	})
	return out, err
}
