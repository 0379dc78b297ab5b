package cxdbcompat

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

const fixtureDir = "testdata/fixtures"

// fixture is one upstream protocol fixture file.
type fixture struct {
	Name       string  `json:"name"`
	MsgType    MsgType `json:"msg_type"`
	Flags      uint16  `json:"flags"`
	PayloadHex string  `json:"payload_hex"`
	Payload    []byte  `json:"-"`
}

func loadFixtures(tb testing.TB) map[string]fixture {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no fixtures in %s: %v", fixtureDir, err)
	}
	out := make(map[string]fixture, len(paths))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(raw, &f); err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
		if f.Payload, err = hex.DecodeString(f.PayloadHex); err != nil {
			tb.Fatalf("%s: payload_hex: %v", p, err)
		}
		out[f.Name] = f
	}
	return out
}

// hashHex parses a 64-digit hex digest; it panics on bad test input.
func hashHex(s string) Hash {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != HashSize {
		panic("bad hash hex " + s)
	}
	return Hash(b)
}

func repeatHash(b byte) Hash {
	var h Hash
	for i := range h {
		h[i] = b
	}
	return h
}

const conversationItem = "cxdb.ConversationItem"

func appendFixture(parent uint64, payload []byte, hash string) AppendTurnRequest {
	return AppendTurnRequest{
		ContextID:           1,
		ParentTurnID:        parent,
		DeclaredTypeID:      conversationItem,
		DeclaredTypeVersion: 3,
		Encoding:            EncodingMsgpack,
		Compression:         CompressionNone,
		UncompressedLen:     2,
		ContentHash:         hashHex(hash),
		Payload:             payload,
		IdempotencyKey:      []byte{},
	}
}

// fixtureWant lists, per fixture, the size and decoded value given in the
// fixtures README.
func fixtureWant() map[string]struct {
	size int
	want Request
} {
	withKey := appendFixture(0, []byte{0x91, 0x03}, "c64508d46d75fdcd20f5c5914214bb5bc763052b90bc424fcc5383bd3262ce97")
	withKey.IdempotencyKey = []byte("idem-1")
	withFS := appendFixture(0, []byte{0x91, 0x04}, "b38abdb0c819bbff7dd7ea8a0d2d4f3858de2be18c7468df47b6f39a728e05cf")
	withFS.HasFSRoot, withFS.FSRootHash = true, repeatHash(0xBB)
	return map[string]struct {
		size int
		want Request
	}{
		"hello_empty":       {8, HelloRequest{ProtocolVersion: 1, ClientTag: "", ClientMetaJSON: []byte{}}},
		"hello_tag":         {19, HelloRequest{ProtocolVersion: 1, ClientTag: "test-client", ClientMetaJSON: []byte{}}},
		"ctx_create_base0":  {8, CtxCreateRequest{BaseTurnID: 0}},
		"ctx_fork_base123":  {8, CtxForkRequest{BaseTurnID: 123}},
		"get_head_ctx42":    {8, GetHeadRequest{ContextID: 42}},
		"append_parent0":    {99, appendFixture(0, []byte{0x91, 0x01}, "7d911c8b58f0ac3a109a19007f8dea0f023d55ce8698b947828cb79b3ba0b7b6")},
		"append_parent7":    {99, appendFixture(7, []byte{0x91, 0x02}, "3cb94a2ed1cdced03ed54d2afc31ca20bcc2b4ad613f4f7158a106f9adec9b39")},
		"append_idempotent": {105, withKey},
		"append_with_fs":    {131, withFS},
		"get_last_default":  {16, GetLastRequest{ContextID: 1, Limit: 10, IncludePayload: false}},
		"get_last_payload":  {16, GetLastRequest{ContextID: 1, Limit: 5, IncludePayload: true}},
		"attach_fs":         {40, AttachFSRequest{TurnID: 99, FSRootHash: repeatHash(0xAA)}},
		"put_blob": {46, PutBlobRequest{
			Hash: hashHex("0c82c44eaf4c3639df7c38503f60a5b609679ddc490c20ea74b4e514a4c25abf"),
			Data: []byte("hello blob"),
		}},
	}
}

func TestFixturesDecode(t *testing.T) {
	fixtures := loadFixtures(t)
	wants := fixtureWant()
	if len(fixtures) != len(wants) {
		t.Fatalf("have %d fixtures, expectations for %d", len(fixtures), len(wants))
	}
	for name, tc := range wants {
		t.Run(name, func(t *testing.T) {
			f, ok := fixtures[name]
			if !ok {
				t.Fatalf("fixture %s missing", name)
			}
			if len(f.Payload) != tc.size {
				t.Errorf("payload is %d bytes, README says %d", len(f.Payload), tc.size)
			}
			if f.MsgType != tc.want.MsgType() || f.Flags != tc.want.Flags() {
				t.Errorf("msg_type/flags = %d/%d, want %d/%d", f.MsgType, f.Flags, tc.want.MsgType(), tc.want.Flags())
			}
			got, err := DecodeRequest(f.MsgType, f.Flags, f.Payload)
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded\n got %#v\nwant %#v", got, tc.want)
			}
			if enc := tc.want.AppendTo(nil); !bytes.Equal(enc, f.Payload) {
				t.Errorf("re-encoded\n got %x\nwant %x", enc, f.Payload)
			}
		})
	}
}

// TestFixtureHashes checks every content hash in the fixtures against
// BLAKE3 of the data it covers.
func TestFixtureHashes(t *testing.T) {
	for name, f := range loadFixtures(t) {
		req, err := DecodeRequest(f.MsgType, f.Flags, f.Payload)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch r := req.(type) {
		case AppendTurnRequest:
			if got := Hash(blake3.Sum256(r.Payload)); got != r.ContentHash {
				t.Errorf("%s: BLAKE3(payload) = %s, content_hash = %s", name, got, r.ContentHash)
			}
			if int(r.UncompressedLen) != len(r.Payload) {
				t.Errorf("%s: uncompressed_len %d != len(payload) %d", name, r.UncompressedLen, len(r.Payload))
			}
		case PutBlobRequest:
			if got := Hash(blake3.Sum256(r.Data)); got != r.Hash {
				t.Errorf("%s: BLAKE3(data) = %s, hash = %s", name, got, r.Hash)
			}
		}
	}
}

// TestFixturesMatchShared guards against the vendored copies drifting from
// the shared fixtures, when the shared directory is present.
func TestFixturesMatchShared(t *testing.T) {
	shared := testkit.CXDBFixtureFiles(t, "protocol")
	local, _ := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if len(local) != len(shared) {
		t.Errorf("%d local fixtures, %d shared", len(local), len(shared))
	}
	for _, p := range shared {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(fixtureDir, filepath.Base(p)))
		if err != nil {
			t.Errorf("missing local copy: %v", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the shared fixture", strings.TrimSuffix(filepath.Base(p), ".json"))
		}
	}
}
