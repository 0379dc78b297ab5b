package cql

import (
	"slices"
	"time"
)

// Record is the searchable view of one context. Absent text fields are "",
// so `tag = ""` finds untagged contexts and `tag != ""` the tagged ones.
type Record struct {
	ID      uint64
	Tag     string // first-turn metadata client_tag
	Title   string
	Labels  []string
	User    string // provenance on_behalf_of
	Service string // provenance service_name
	Host    string // provenance host_name
	TraceID string
	// Parent and Root are the provenance context ids, valid only when the
	// matching Has flag is set; without one, = never matches and != does.
	Parent, Root       uint64
	HasParent, HasRoot bool
	CreatedMs          int64  // context creation time, unix ms
	Depth              uint32 // current head depth
	IsLive             bool   // creating binary session still connected
}

// Filter returns the records matching q, sorted by ID descending, and the
// number of matches before limit is applied. limit <= 0 means no limit.
func Filter(q *Query, records []Record, now time.Time, limit int) (matches []Record, total int) {
	for i := range records {
		if q.Match(&records[i], now) {
			matches = append(matches, records[i])
		}
	}
	slices.SortStableFunc(matches, func(a, b Record) int {
		switch {
		case a.ID > b.ID:
			return -1
		case a.ID < b.ID:
			return 1
		}
		return 0
	})
	total = len(matches)
	if limit > 0 && limit < total {
		matches = matches[:limit]
	}
	return matches, total
}
