package cardbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// Limits of box reads.
const (
	// DefaultCardsLimit is how many of a box's last cards a read returns
	// when the caller gives no limit.
	DefaultCardsLimit = 200
	// MaxCardsLimit is the largest such limit; larger ones are clamped.
	MaxCardsLimit = 500
)

// ClampLimit brings a card limit into 1..MaxCardsLimit.
func ClampLimit(limit int) int {
	return max(1, min(limit, MaxCardsLimit))
}

// BoxesQuery is a batch box read.
type BoxesQuery struct {
	// BoxIDs are up to MaxBatchIDs ids; repeats are dropped.
	BoxIDs []string
	// Hydrate inlines the last Limit live cards of each box.
	Hydrate bool
	// Limit is clamped to 1..MaxCardsLimit.
	Limit int
}

// HydratedBoxJSON is a box of a batch read.
type HydratedBoxJSON struct {
	Box
	// Cards are the JSON of the live cards among the box's last Limit
	// ids, in box order; nil unless the read hydrates.
	Cards []json.RawMessage
}

// BoxesJSON answers a batch box read (GetBoxesJSONWithin). Its cards'
// bytes are shared with the card cache: do not modify them.
type BoxesJSON struct {
	// Boxes are the live boxes, in request order without repeats.
	Boxes []HydratedBoxJSON
	// MissingBoxIDs are the requested ids that are absent, deleted or
	// another project's.
	MissingBoxIDs []string
	// MissingCardIDs are ids in the hydrated part of the boxes that do not
	// resolve to live cards, without repeats.
	MissingCardIDs []string
}

// CardPageJSON is one page of a box's cards (BoxCardsJSONWithin). Its
// cards' bytes are shared with the card cache: do not modify them.
type CardPageJSON struct {
	// Cards are the page's live cards' JSON, in box order.
	Cards []json.RawMessage
	// NextCursor pages further back; empty at the start of the box.
	NextCursor string
}

// CreateBox creates a box with a generated UUIDv7 id.
func (s *Service) CreateBox(ctx context.Context, project string, in BoxInput) (Box, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Box{}, fmt.Errorf("generate box id: %w", err)
	}
	meta, err := s.checkBoxWrite(ctx, project, id.String(), in)
	if err != nil {
		return Box{}, err
	}
	if err := s.admit(ctx, project); err != nil {
		return Box{}, err
	}
	defer s.gate.Leave()
	now := s.now()
	row, err := s.as(project).InsertBox(ctx, cardboxdb.InsertBoxParams{
		TenantID: project, BoxID: id.String(), CardIds: nonNil(in.CardIDs),
		ParentIds: nonNil(in.ParentIDs), Metadata: meta, Now: now,
	})
	if err != nil {
		return Box{}, fmt.Errorf("create box: %w", err)
	}
	return boxFromRow(cardboxdb.GetLiveBoxRow(row)), nil
}

// SaveBox creates or replaces a box. Every card id must name a live card
// of the project (else UnknownCardsError). Saving a deleted box's id
// creates it anew.
func (s *Service) SaveBox(ctx context.Context, project, boxID string, in BoxInput) (Box, error) {
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return Box{}, err
	}
	meta, err := s.checkBoxWrite(ctx, project, boxID, in)
	if err != nil {
		return Box{}, err
	}
	if err := s.admit(ctx, project); err != nil {
		return Box{}, err
	}
	defer s.gate.Leave()
	row, err := s.as(project).UpsertBox(ctx, cardboxdb.UpsertBoxParams{
		TenantID: project, BoxID: boxID, CardIds: nonNil(in.CardIDs),
		ParentIds: nonNil(in.ParentIDs), Metadata: meta, Now: s.now(),
	})
	if err != nil {
		return Box{}, fmt.Errorf("save box %q: %w", boxID, err)
	}
	return boxFromRow(cardboxdb.GetLiveBoxRow(row)), nil
}

// checkBoxWrite validates a box body, checks its cards exist, admits its
// bytes (a replaced box's too, as if it were new) and makes sure the
// project exists; it returns the metadata to store.
func (s *Service) checkBoxWrite(ctx context.Context, project, boxID string, in BoxInput) ([]byte, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if err := rules.ValidateIDs("card_ids", in.CardIDs); err != nil {
		return nil, err
	}
	if err := rules.ValidateIDs("parent_ids", in.ParentIDs); err != nil {
		return nil, err
	}
	if err := checkBoxSize(in); err != nil {
		return nil, err
	}
	meta, err := boxMetadata(in.Metadata)
	if err != nil {
		return nil, err
	}
	if err := s.checkCards(ctx, project, in.CardIDs); err != nil {
		return nil, err
	}
	if err := s.admitWrite(ctx, project, boxBytes(boxID, in, meta)); err != nil {
		return nil, err
	}
	return meta, nil
}

// checkBoxSize checks a box body against MaxBoxCards and MaxBoxParents,
// and that no parent is named twice (card ids may repeat: a box is a list).
func checkBoxSize(in BoxInput) error {
	if len(in.CardIDs) > rules.MaxBoxCards {
		return rules.Invalid("card_ids", "a box holds at most %d card ids, got %d", rules.MaxBoxCards, len(in.CardIDs))
	}
	if len(in.ParentIDs) > rules.MaxBoxParents {
		return rules.Invalid("parent_ids", "a box names at most %d parents, got %d", rules.MaxBoxParents, len(in.ParentIDs))
	}
	return rules.UniqueIDs("parent_ids", in.ParentIDs)
}

// boxMetadata checks a box's metadata: a JSON object, {} when absent.
func boxMetadata(raw []byte) ([]byte, error) {
	m, err := rules.OptionalJSON("metadata", raw)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return []byte("{}"), nil
	}
	if m[0] != '{' {
		return nil, rules.Invalid("metadata", "must be a JSON object")
	}
	return m, rules.CheckMetadataSize(m)
}

// checkCards returns UnknownCardsError when some ids do not name live cards
// of the project.
func (s *Service) checkCards(ctx context.Context, project string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	missing, err := s.as(project).MissingCardIDs(ctx, cardboxdb.MissingCardIDsParams{
		TenantID: project, CardIds: rules.Dedupe(ids), Now: s.now(),
	})
	if err != nil {
		return fmt.Errorf("check card ids: %w", err)
	}
	if len(missing) > 0 {
		return &rules.UnknownCardsError{CardIDs: missing}
	}
	return nil
}

// Appended is the outcome of an append: the box's new length and update
// time, not its ids, so that an append's answer does not grow with the box.
type Appended struct {
	ProjectID string
	BoxID     string
	// Length is the number of card ids in the box after the append.
	Length    int
	UpdatedAt time.Time
	// cursor is the cursor of a box with entries; "" for a plain box.
	cursor string
}

// Cursor is the BoxCardsJSONWithin cursor of the page that ends with the appended
// ids.
func (a Appended) Cursor() string {
	if a.cursor != "" {
		return a.cursor
	}
	return strconv.Itoa(a.Length)
}

// AppendToBox appends card ids to a box atomically: concurrent appends to
// one box all land, in some order. The box must exist (ErrNotFound), every
// id must name a live card of the project (UnknownCardsError), and the box
// must stay within MaxBoxCards.
func (s *Service) AppendToBox(ctx context.Context, project, boxID string, cardIDs []string) (Appended, error) {
	if err := s.checkAppend(ctx, project, boxID, cardIDs); err != nil {
		return Appended{}, err
	}
	if err := s.admitWrite(ctx, project, idBytes(cardIDs)); err != nil {
		return Appended{}, err
	}
	row, err := s.as(project).AppendToBox(ctx, cardboxdb.AppendToBoxParams{
		TenantID: project, BoxID: boxID, CardIds: cardIDs, Now: s.now(), MaxCards: rules.MaxBoxCards,
	})
	if isNoRows(err) {
		if structured, _ := s.structured(ctx, project, boxID); structured {
			a, cursor, err := s.appendEntries(ctx, project, boxID, cardIDs, "")
			a.cursor = cursor
			return a, err
		}
		return Appended{}, s.appendRefused(ctx, project, boxID, len(cardIDs))
	}
	if err != nil {
		return Appended{}, fmt.Errorf("append to box %q: %w", boxID, err)
	}
	return Appended{ProjectID: project, BoxID: boxID, Length: int(row.Length), UpdatedAt: row.UpdatedAt}, nil
}

// checkAppend validates an append and checks that its cards exist.
func (s *Service) checkAppend(ctx context.Context, project, boxID string, cardIDs []string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return err
	}
	if len(cardIDs) == 0 {
		return rules.Invalid("card_ids", "at least one card id is required")
	}
	if err := rules.ValidateIDs("card_ids", cardIDs); err != nil {
		return err
	}
	err := s.checkCards(ctx, project, cardIDs)
	if err != nil {
		if _, lerr := s.boxLength(ctx, project, boxID); errors.Is(lerr, rules.ErrNotFound) {
			return lerr // an unknown box outranks unknown cards
		}
	}
	return err
}

// appendRefused says why an append changed nothing: the box is absent or
// deleted, or it would grow beyond MaxBoxCards.
func (s *Service) appendRefused(ctx context.Context, project, boxID string, adding int) error {
	n, err := s.boxLength(ctx, project, boxID)
	if err != nil {
		return err
	}
	return rules.Invalid("card_ids", "a box holds at most %d card ids; box %q holds %d and this append adds %d",
		rules.MaxBoxCards, boxID, n, adding)
}

// boxLength returns how many card ids a live box holds.
func (s *Service) boxLength(ctx context.Context, project, boxID string) (int, error) {
	n, err := s.as(project).LiveBoxLength(ctx, cardboxdb.LiveBoxLengthParams{TenantID: project, BoxID: boxID})
	if isNoRows(err) {
		return 0, rules.NotFound("box", boxID)
	}
	if err != nil {
		return 0, fmt.Errorf("read length of box %q: %w", boxID, err)
	}
	return int(n), nil
}

// LoadBox returns a live box; an absent or deleted box is ErrNotFound.
func (s *Service) LoadBox(ctx context.Context, project, boxID string) (Box, error) {
	if err := checkProject(project); err != nil {
		return Box{}, err
	}
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return Box{}, err
	}
	row, err := s.as(project).GetLiveBox(ctx, cardboxdb.GetLiveBoxParams{TenantID: project, BoxID: boxID})
	if isNoRows(err) {
		return Box{}, rules.NotFound("box", boxID)
	}
	if err != nil {
		return Box{}, fmt.Errorf("load box %q: %w", boxID, err)
	}
	return boxFromRow(row), nil
}

// DeleteBox soft-deletes a box. Deleting a deleted box is a no-op; an
// absent one is ErrNotFound.
func (s *Service) DeleteBox(ctx context.Context, project, boxID string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return err
	}
	n, err := s.as(project).SoftDeleteBox(ctx, cardboxdb.SoftDeleteBoxParams{TenantID: project, BoxID: boxID, Now: s.now()})
	if err != nil {
		return fmt.Errorf("delete box %q: %w", boxID, err)
	}
	if n == 0 {
		return rules.NotFound("box", boxID)
	}
	return nil
}

// pageOfIDs is the card ids of one page of a box, in box order.
type pageOfIDs struct {
	ids []string
	// cursorBefore is the cursor of the page that ends before ids[i]; ""
	// when ids[i] is the box's first.
	cursorBefore func(i int) string
}

// pageIDs reads the card ids of one page of a box (see BoxCardsJSONWithin): by
// index in a plain box, by place in a box with entries.
func (s *Service) pageIDs(ctx context.Context, project, boxID string, limit int, cursor string) (pageOfIDs, error) {
	if _, _, isEntry, err := layout.ParseCursor(cursor); isEntry || err != nil {
		if err != nil {
			return pageOfIDs{}, err
		}
		return s.entryPageIDs(ctx, project, boxID, limit, cursor)
	}
	page, err := s.boxPage(ctx, project, boxID, limit, cursor)
	if err != nil {
		return pageOfIDs{}, err
	}
	if page.Structured {
		return s.entryPageIDs(ctx, project, boxID, limit, cursor)
	}
	return pageOfIDs{ids: page.CardIds, cursorBefore: func(i int) string {
		if first := int(page.PageStart) + i; first > 0 {
			return strconv.Itoa(first)
		}
		return ""
	}}, nil
}

// boxPage reads the card ids of one page of a box (see BoxCardsJSONWithin).
func (s *Service) boxPage(ctx context.Context, project, boxID string, limit int, cursor string) (cardboxdb.GetBoxPageRow, error) {
	if err := checkProject(project); err != nil {
		return cardboxdb.GetBoxPageRow{}, err
	}
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return cardboxdb.GetBoxPageRow{}, err
	}
	before, err := layout.ParseIndexCursor(cursor)
	if err != nil {
		return cardboxdb.GetBoxPageRow{}, err
	}
	page, err := s.as(project).GetBoxPage(ctx, cardboxdb.GetBoxPageParams{
		TenantID: project, BoxID: boxID, PageLimit: int32(ClampLimit(limit)), Before: before,
	})
	if isNoRows(err) {
		return cardboxdb.GetBoxPageRow{}, rules.NotFound("box", boxID)
	}
	if err != nil {
		return cardboxdb.GetBoxPageRow{}, fmt.Errorf("read box %q: %w", boxID, err)
	}
	return page, nil
}

// tail returns the last n ids.
func tail(ids []string, n int) []string {
	if len(ids) <= n {
		return ids
	}
	return ids[len(ids)-n:]
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func boxFromRow(r cardboxdb.GetLiveBoxRow) Box {
	meta := r.Metadata
	if len(bytes.TrimSpace(meta)) == 0 {
		meta = []byte("{}")
	}
	return Box{
		ProjectID: r.TenantID, BoxID: r.BoxID, CardIDs: nonNil(r.CardIds),
		ParentIDs: nonNil(r.ParentIds), Metadata: meta,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// structured reports whether a live box has entries (zones and positions).
func (s *Service) structured(ctx context.Context, project, boxID string) (bool, error) {
	row, err := s.as(project).GetBoxEntries(ctx, cardboxdb.GetBoxEntriesParams{TenantID: project, BoxID: boxID})
	if err != nil {
		return false, err
	}
	return row.Structured, nil
}

// entryPageIDs is pageIDs for a box with entries: its cursors name
// places in the box (see layout.BeforeCursor), so that edits elsewhere do
// not shift pages.
func (s *Service) entryPageIDs(ctx context.Context, project, boxID string, limit int, cursor string) (pageOfIDs, error) {
	box, err := s.Entries(ctx, project, boxID)
	if err != nil {
		return pageOfIDs{}, err
	}
	end, err := layout.PageEnd(box.Entries, cursor)
	if err != nil {
		return pageOfIDs{}, err
	}
	start := max(0, end-ClampLimit(limit))
	ids := make([]string, 0, end-start)
	for _, e := range box.Entries[start:end] {
		ids = append(ids, e.CardID)
	}
	return pageOfIDs{ids: ids, cursorBefore: func(i int) string {
		if start+i > 0 {
			return layout.BeforeCursor(box.Entries[start+i])
		}
		return ""
	}}, nil
}
