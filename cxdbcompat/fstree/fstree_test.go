package fstree

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestDecode(t *testing.T) {
	hash := make([]byte, 32)
	hash[0] = 7
	digitKeys, _ := msgpack.Marshal([]map[string]any{
		{"1": "a.txt", "2": uint8(0), "3": uint32(420), "4": uint64(5), "5": hash},
		{"1": "dir", "2": uint8(1), "3": uint32(493), "4": uint64(0), "5": hash},
	})
	intKeys, _ := msgpack.Marshal([]map[int]any{{1: "link", 2: 2, 3: 511, 4: 3, 5: hash}, {1: "odd", 2: 9, 5: []byte{1}}})
	tests := []struct {
		name    string
		in      []byte
		want    []Entry
		wantErr bool
	}{
		{"empty directory as nil", []byte{0xc0}, nil, false},
		{"empty array", []byte{0x90}, []Entry{}, false},
		{"digit-string keys", digitKeys, []Entry{
			{Name: "a.txt", Kind: KindFile, Mode: 420, Size: 5, Hash: [32]byte{7}, HashOK: true},
			{Name: "dir", Kind: KindDir, Mode: 493, Hash: [32]byte{7}, HashOK: true},
		}, false},
		{"integer keys, odd kind and hash", intKeys, []Entry{
			{Name: "link", Kind: KindSymlink, Mode: 511, Size: 3, Hash: [32]byte{7}, HashOK: true},
			{Name: "odd", Kind: KindFile},
		}, false},
		{"nil entry, bin name, later key wins", []byte{0x92, 0xc0, 0x83, 0x01, 0xc4, 0x01, 'b', 0xa1, '4', 0x07, 0x04, 0xa1, 'x'},
			[]Entry{{}, {Name: "b"}}, false},
		{"not quite a field key", []byte{0x91, 0x82, 0xa2, '0', '1', 0xa1, 'x', 0x06, 0xa1, 'y'}, []Entry{{}}, false},
		{"nested value skipped", []byte{0x91, 0x82, 0x01, 0x91, 0xa1, 'x', 0x02, 0x01}, []Entry{{Kind: KindDir}}, false},
		{"timestamp ext ignored", []byte{0x91, 0x81, 0x01, 0xd6, 0xff, 0, 0, 0, 0}, []Entry{{}}, false},
		{"other ext", []byte{0x91, 0x81, 0x01, 0xd4, 0x01, 0x00}, nil, true},
		{"nested too deep", append([]byte{0x91, 0x81, 0x01}, nest(maxDepth)...), nil, true},
		{"count beyond the bytes", []byte{0x93, 0xc0, 0xc0}, nil, true},
		{"not an array", []byte{0xa1, 'x'}, nil, true},
		{"entry not a map", []byte{0x91, 0x01}, nil, true},
		{"not msgpack", []byte{0xc1}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.in)
			if (err != nil) != tt.wantErr || len(got) != len(tt.want) {
				t.Fatalf("Decode = %+v, %v", got, err)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// nest is n one-item arrays around nil.
func nest(n int) []byte {
	return append(bytes.Repeat([]byte{0x91}, n), 0xc0)
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{0xc0})
	f.Add([]byte{0x91, 0x81, 0xa1, '1', 0xa1, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = Decode(b) })
}
