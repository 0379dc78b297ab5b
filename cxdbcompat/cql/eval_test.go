package cql

import (
	"slices"
	"testing"
	"time"
)

var testNow = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

// testRecords is deliberately unsorted so Filter's ordering is exercised.
func testRecords() []Record {
	return []Record{
		{ID: 2, Tag: "chat-bot", Title: "hello there", Labels: []string{"env=dev"}, User: "bob",
			Service: "API-gw", Host: "host-b", TraceID: "tr-2", Parent: 1, HasParent: true, Root: 1, HasRoot: true,
			CreatedMs: 1767268800000, Depth: 0}, // 2026-01-01T12:00:00Z
		{ID: 1, Tag: "Chat-App", Title: "Hello World", Labels: []string{"env=prod", "team-a"}, User: "Alice",
			Service: "api", Host: "Host-A", TraceID: "tr-1", CreatedMs: 1767312000000, Depth: 3, IsLive: true}, // 2026-01-02
		{ID: 4, Tag: "other", Title: "say \"hi\"\n", Parent: 2, HasParent: true, Root: 1, HasRoot: true,
			CreatedMs: testNow.Add(-2 * time.Hour).UnixMilli(), Depth: 1, IsLive: true},
		{ID: 3, CreatedMs: testNow.Add(-30 * time.Minute).UnixMilli(), Depth: 10},
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		q    string
		want []uint64
	}{
		// id
		{`id = 2`, []uint64{2}},
		{`id != 2`, []uint64{4, 3, 1}},
		{`id IN (1, 3, "x")`, []uint64{3, 1}},
		{`id = 2.9`, []uint64{2}},
		{`id = -1`, nil},
		// tag and the shared text operators
		{`tag = "chat-bot"`, []uint64{2}},
		{`tag = "Chat-bot"`, nil},
		{`tag != "chat-bot"`, []uint64{4, 3, 1}},
		{`tag ^= "chat"`, []uint64{2}},
		{`tag ~= "CHAT-APP"`, []uint64{1}},
		{`tag ^~= "CHAT"`, []uint64{2, 1}},
		{`tag IN ("other", "chat-bot", 7)`, []uint64{4, 2}},
		{`tag = ""`, []uint64{3}},
		{`tag != ""`, []uint64{4, 2, 1}},
		{`tag = '-5m'`, nil},
		{`title = 'hello there'`, []uint64{2}},
		{`title != "hello there"`, []uint64{4, 3, 1}},
		{`title ^= "hello"`, []uint64{2}},
		{`title ~= "hello world"`, []uint64{1}},
		{`title ^~= "HELLO"`, []uint64{2, 1}},
		{`title IN ("Hello World")`, []uint64{1}},
		{`title = "say \"hi\"\n"`, []uint64{4}},
		{`user = "bob"`, []uint64{2}},
		{`user != "bob"`, []uint64{4, 3, 1}},
		{`user ^= "Al"`, []uint64{1}},
		{`user ~= "ALICE"`, []uint64{1}},
		{`user ^~= "b"`, []uint64{2}},
		{`user IN ("bob", "Alice")`, []uint64{2, 1}},
		{`service = "api"`, []uint64{1}},
		{`service != "api"`, []uint64{4, 3, 2}},
		{`service ^= "api"`, []uint64{1}},
		{`service ~= "api-GW"`, []uint64{2}},
		{`service ^~= "api"`, []uint64{2, 1}},
		{`service IN ("API-gw")`, []uint64{2}},
		// host: ~= and ^~= are case-sensitive
		{`host = "host-b"`, []uint64{2}},
		{`host != "host-b"`, []uint64{4, 3, 1}},
		{`host ^= "Host"`, []uint64{1}},
		{`host ~= "host-a"`, nil},
		{`host ~= "Host-A"`, []uint64{1}},
		{`host ^~= "host"`, []uint64{2}},
		{`host IN ("Host-A", "host-b")`, []uint64{2, 1}},
		// label: any label equal
		{`label = "env=prod"`, []uint64{1}},
		{`label = "team-a"`, []uint64{1}},
		{`label != "env=prod"`, []uint64{4, 3, 2}},
		{`label IN ("team-a", "env=dev")`, []uint64{2, 1}},
		// trace_id
		{`trace_id = "tr-1"`, []uint64{1}},
		{`trace_id != "tr-1"`, []uint64{4, 3, 2}},
		// parent and root: absent never equals
		{`parent = 1`, []uint64{2}},
		{`parent = 0`, nil},
		{`parent != 1`, []uint64{4, 3, 1}},
		{`parent IN (1, 2)`, []uint64{4, 2}},
		{`root = 1`, []uint64{4, 2}},
		{`root != 1`, []uint64{3, 1}},
		{`root IN (1.5)`, []uint64{4, 2}},
		// depth
		{`depth = 3`, []uint64{1}},
		{`depth = 3.7`, []uint64{1}},
		{`depth != 0`, []uint64{4, 3, 1}},
		{`depth > 1`, []uint64{3, 1}},
		{`depth >= 1`, []uint64{4, 3, 1}},
		{`depth < 3`, []uint64{4, 2}},
		{`depth <= 3`, []uint64{4, 2, 1}},
		{`depth > -5`, []uint64{4, 3, 1}},
		// created: relative dates from testNow (m = minutes)
		{`created > "-1h"`, []uint64{3}},
		{`created > "-90m"`, []uint64{3}},
		{`created >= "-2h"`, []uint64{4, 3}},
		{`created < "-1d"`, []uint64{2, 1}},
		{`created < '-30d'`, []uint64{2}},
		{`created <= '-30d'`, []uint64{2, 1}},
		// created: absolute dates
		{`created = "2026-01-02"`, []uint64{1}},
		{`created != "2026-01-02"`, []uint64{4, 3, 2}},
		{`created >= "2026-01-02"`, []uint64{4, 3, 1}},
		{`created < "2026-01-02T00:00:00Z"`, []uint64{2}},
		{`created = "2026-01-01T13:00:00+01:00"`, []uint64{2}},
		{`created = "2026-01-01t12:00:00.000z"`, []uint64{2}},
		{`created = 1767312000000`, []uint64{1}},
		{`created <= 1767312000000.9`, []uint64{2, 1}},
		// out-of-range values saturate instead of wrapping
		{`created > "-9999999999999999999d"`, []uint64{4, 3, 2, 1}},
		{`created > -5`, []uint64{4, 3, 2, 1}},
		{`created < 99999999999999999999999`, []uint64{4, 3, 2, 1}},
		{`depth < 99999999999999999999999`, []uint64{4, 3, 2, 1}},
		// is_live
		{`is_live = true`, []uint64{4, 1}},
		{`is_live = TRUE`, []uint64{4, 1}},
		{`is_live = "true"`, []uint64{4, 1}},
		{`is_live = false`, []uint64{3, 2}},
		{`is_live = "TRUE"`, []uint64{3, 2}},
		{`is_live = "yes"`, []uint64{3, 2}},
		// logic, precedence NOT > AND > OR, parentheses, keyword case
		{`NOT tag = "other"`, []uint64{3, 2, 1}},
		{`tag = "other" OR tag = ""`, []uint64{4, 3}},
		{`tag = "other" or tag = "" and depth < 5`, []uint64{4}},
		{`(tag = "other" or tag = "") and depth < 5`, []uint64{4}},
		{`tag = "" AND depth > 5 OR id = 4`, []uint64{4, 3}},
		{`tag = "" AND (depth > 5 OR id = 4)`, []uint64{3}},
		{`NOT is_live = true AND depth > 0`, []uint64{3}},
		{`NOT (is_live = true AND depth > 0)`, []uint64{3, 2}},
		{`not id = 1 aNd Not id = 2`, []uint64{4, 3}},
		{`((id = 1))`, []uint64{1}},
		{`id = 1 OR id = 2 OR id = 3 AND id = 3`, []uint64{3, 2, 1}},
		{"id\n=\t1\r\nOR\u00a0id = 2", []uint64{2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			q, err := Parse(tt.q)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, total := Filter(q, testRecords(), testNow, 0)
			if ids := recordIDs(got); !slices.Equal(ids, tt.want) || total != len(tt.want) {
				t.Errorf("matched %v (total %d), want %v", ids, total, tt.want)
			}
		})
	}
}

func recordIDs(rs []Record) []uint64 {
	var ids []uint64
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestRelativeDateFollowsNow(t *testing.T) {
	q := mustParse(t, `created > "-1h"`)
	r := &Record{CreatedMs: testNow.UnixMilli()}
	if !q.Match(r, testNow) {
		t.Error("record created at now should be within the last hour")
	}
	if q.Match(r, testNow.Add(2*time.Hour)) {
		t.Error("two hours later the record should be older than an hour")
	}
	if !q.Match(r, time.Unix(0, 0)) {
		t.Error("a relative date before the epoch clamps to 0, below the record")
	}
}

func TestUIFallbackQuery(t *testing.T) {
	recs := []Record{
		{ID: 5},
		{ID: 6, Tag: "Trace"}, {ID: 7, Title: "tiny"}, {ID: 8, User: "Tom"},
		{ID: 9, Service: "tasks"}, {ID: 10, Host: "t1"}, {ID: 11, Host: "T1"},
		{ID: 12, Labels: []string{"t"}}, {ID: 13, Tag: "x"},
	}
	for _, text := range []string{
		`id = 5 OR tag ^~= "t" OR title ^~= "t" OR user ^~= "t" OR service ^~= "t" OR host ^~= "t" OR label = "t"`,
		`tag ^~= "t" OR title ^~= "t" OR user ^~= "t" OR service ^~= "t" OR host ^~= "t" OR label = "t"`,
	} {
		got, total := Filter(mustParse(t, text), recs, testNow, 0)
		want := []uint64{12, 10, 9, 8, 7, 6}
		if text[0] == 'i' {
			want = append(want, 5)
		}
		if ids := recordIDs(got); !slices.Equal(ids, want) || total != len(want) {
			t.Errorf("%s: matched %v, want %v", text, ids, want)
		}
	}
}

func TestHugeIDSaturates(t *testing.T) {
	q := mustParse(t, `id = 99999999999999999999999`)
	if !q.Match(&Record{ID: 1<<64 - 1}, testNow) || q.Match(&Record{ID: 1}, testNow) {
		t.Error("an id past 2^64 should saturate to the largest id")
	}
}

func TestFilterLimit(t *testing.T) {
	q := mustParse(t, `depth >= 0`)
	for _, tt := range []struct {
		limit int
		want  []uint64
	}{
		{0, []uint64{4, 3, 2, 1}},
		{-1, []uint64{4, 3, 2, 1}},
		{2, []uint64{4, 3}},
		{10, []uint64{4, 3, 2, 1}},
	} {
		got, total := Filter(q, testRecords(), testNow, tt.limit)
		if ids := recordIDs(got); !slices.Equal(ids, tt.want) || total != 4 {
			t.Errorf("limit %d: got %v total %d, want %v total 4", tt.limit, ids, total, tt.want)
		}
	}
	if got, total := Filter(q, nil, testNow, 5); len(got) != 0 || total != 0 {
		t.Errorf("no records: got %v, %d", got, total)
	}
}

func mustParse(t testing.TB, q string) *Query {
	t.Helper()
	p, err := Parse(q)
	if err != nil {
		t.Fatalf("Parse(%q): %v", q, err)
	}
	return p
}
