package service

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// Lists and searches read contexts' metadata, whose titles, labels and
// provenance have no length limit, in batches: Postgres measures it first
// (metastore.Store.MetadataSizes), and a batch holds at most
// metadataBatchBytes of it (or one context's alone), charged before it is
// loaded. A filter borrows each batch while it looks at it and lets it go;
// a page reserves each entry's bytes before loading its metadata, so that
// a page the budget cannot hold ends before loading what it cannot
// answer.
const metadataBatchBytes = 1 << 20

// metadataOverhead is at least what a context's metadata holds in memory
// beside its bytes: the strings' and slices' headers.
const metadataOverhead = 128

// Charge is how a list or search accounts for the memory it holds; either
// function may be nil.
type Charge struct {
	// Reserve is told each entry's bytes (at least its JSON) before the
	// entry joins the answer, to charge them to a memory budget until the
	// answer is sent; ErrAnswerFull from it ends the answer before the
	// entry, another error fails the list.
	Reserve func(n int64) error
	// Borrow charges n bytes of metadata a filter looks at, given back by
	// release once it has; an error fails the list.
	Borrow func(n int64) (release func(), err error)
}

func (c Charge) borrow(n int64) (release func(), err error) {
	if c.Borrow == nil {
		return func() {}, nil
	}
	return c.Borrow(n)
}

// scanMetadata calls fn with rows in batches, their metadata attached,
// each batch borrowed from charge while fn looks at it. The metadata is
// detached again once fn returns: fn keeps what it needs of it.
func (s *Service) scanMetadata(ctx context.Context, t ident.Tenant, rows []contextRow, charge Charge, fn func(batch []contextRow)) error {
	sizes, err := s.metas.MetadataSizes(ctx, t, nil)
	if err != nil {
		return err
	}
	for start := 0; start < len(rows); {
		end, bytes := start, int64(0)
		for end < len(rows) && (end == start || bytes+metadataCost(sizes, rows[end]) <= metadataBatchBytes) {
			bytes += metadataCost(sizes, rows[end])
			end++
		}
		if err := s.withMetadata(ctx, t, rows[start:end], sizes, bytes, charge, fn); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// withMetadata borrows bytes, attaches the metadata of batch, calls fn
// with it and detaches it.
func (s *Service) withMetadata(ctx context.Context, t ident.Tenant, batch []contextRow, sizes map[uint64]int64, bytes int64, charge Charge, fn func([]contextRow)) error {
	release, err := charge.borrow(bytes)
	if err != nil {
		return err
	}
	defer release()
	if err := s.attachMetadata(ctx, t, batch, sizes); err != nil {
		return err
	}
	fn(batch)
	for i := range batch {
		batch[i].meta = nil
	}
	return nil
}

// metadataCost is what r's metadata holds in memory once loaded.
func metadataCost(sizes map[uint64]int64, r contextRow) int64 {
	size, ok := sizes[r.info.ContextID]
	if !ok {
		return 0
	}
	return size + metadataOverhead
}

// loadPage attaches the metadata of rows in order, reserving each row's
// entry in page before its metadata is loaded: entryFloor(r) bytes, r's
// entry without metadata, plus the metadata's size, and then what the
// built entry (entrySize) needs beyond that. It returns how many rows
// join the page: fewer than len(rows) when page refused the next.
func (s *Service) loadPage(ctx context.Context, t ident.Tenant, rows []contextRow, page *answerBytes, entrySize func(contextRow) int) (int, error) {
	ids := make([]uint64, len(rows))
	for i, r := range rows {
		ids[i] = r.info.ContextID
	}
	sizes, err := s.metas.MetadataSizes(ctx, t, ids)
	if err != nil {
		return 0, err
	}
	reserved := make([]int, len(rows))
	for start := 0; start < len(rows); {
		end, bytes, full := start, 0, false
		for end < len(rows) && (end == start || bytes < metadataBatchBytes) {
			n := entryOverhead + int(metadataCost(sizes, rows[end]))
			fits, err := page.add(end == 0, n)
			if err != nil {
				return 0, err
			}
			if !fits {
				full = true
				break
			}
			reserved[end], bytes = n, bytes+n
			end++
		}
		if err := s.attachMetadata(ctx, t, rows[start:end], sizes); err != nil {
			return 0, err
		}
		for i := start; i < end; i++ {
			more := entrySize(rows[i]) - reserved[i]
			if more <= 0 {
				continue
			}
			fits, err := page.add(i == 0, more)
			if err != nil {
				return 0, err
			}
			if !fits {
				return i, nil
			}
		}
		if full {
			return end, nil
		}
		start = end
	}
	return len(rows), nil
}

// attachMetadata loads the metadata of the rows sizes says have some.
func (s *Service) attachMetadata(ctx context.Context, t ident.Tenant, rows []contextRow, sizes map[uint64]int64) error {
	var ids []uint64
	for _, r := range rows {
		if _, ok := sizes[r.info.ContextID]; ok && r.meta == nil {
			ids = append(ids, r.info.ContextID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	found, err := s.metas.Metadata(ctx, t, ids)
	if err != nil {
		return err
	}
	for i := range rows {
		if m, ok := found[rows[i].info.ContextID]; ok && rows[i].meta == nil {
			rows[i].meta = &m
		}
	}
	return nil
}
