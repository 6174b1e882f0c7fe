package layout

import (
	"crypto/sha256"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
)

func TestChunkNames(t *testing.T) {
	tests := []struct {
		name   string
		n      uint32
		sealed bool
		ok     bool
	}{
		{"000000.jsonl", 0, false, true},
		{"000007.jsonl.zst", 7, true, true},
		{"999999.jsonl", 999999, false, true},
		{"1000000.jsonl", 1000000, false, true},
		{"2147483647.jsonl", 1<<31 - 1, false, true},
		{"2147483648.jsonl", 0, false, false},     // past 31 bits
		{"0000001.jsonl", 0, false, false},        // seven digits with a leading zero
		{"00001.jsonl", 0, false, false},          // fewer than six digits
		{"+00001.jsonl", 0, false, false},         // a sign
		{"000001.jsonl.zst.tmp", 0, false, false}, // a sealing's temporary file
		{"000001.jsonl.broken-12", 0, false, false},
		{"000001.jsonl.rewrite.tmp", 0, false, false},
		{"000001.jsonl.zst.zst", 0, false, false},
		{"000001.json", 0, false, false},
		{"index.jsonl", 0, false, false},
		{"", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, sealed, ok := ParseChunkName(tt.name)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.n, n)
			assert.Equal(t, tt.sealed, sealed)
			if ok {
				want := ChunkName(n)
				if sealed {
					want = SealedName(n)
				}
				assert.Equal(t, tt.name, want, "the name is the one ChunkName writes")
			}
		})
	}
}

func TestParseSealTemp(t *testing.T) {
	for name, want := range map[string]bool{
		"000003.jsonl.zst.tmp":   true,
		"000003.jsonl.zst":       false,
		"000003.jsonl.tmp":       false,
		"03.jsonl.zst.tmp":       false,
		"HEAD.tmp":               false,
		"000003.jsonl.zst.1.tmp": false,
	} {
		assert.Equal(t, want, ParseSealTemp(name), name)
	}
}

func TestPaths(t *testing.T) {
	id := uuid.MustParse("0190a2b4-7c1d-7000-8000-000000000001")
	assert.Equal(t, filepath.Join("/r", "sessions", id.String()), SessionDir("/r", id))
	d := sha256.Sum256([]byte("x"))
	assert.Equal(t, filepath.Join("/s", "blobs", "sha256", "2d", "711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881.zst"), BlobPath("/s", d))
	assert.Equal(t, "/s/chunks/000002.jsonl.broken-4096", BrokenTail("/s/chunks/000002.jsonl", 4096))
}

// FuzzParseChunkName: a name parses only as the one name ChunkName (or
// SealedName) gives its number, so no two files name one chunk.
func FuzzParseChunkName(f *testing.F) {
	for _, s := range []string{"000000.jsonl", "000001.jsonl.zst", "1000000.jsonl", "0000001.jsonl", "000001.jsonl.zst.tmp", "4294967295.jsonl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, sealed, ok := ParseChunkName(name)
		if !ok {
			return
		}
		want := ChunkName(n)
		if sealed {
			want = SealedName(n)
		}
		if name != want {
			t.Fatalf("%q parses as chunk %d (sealed %v), whose name is %q", name, n, sealed, want)
		}
		if n >= 1<<31 {
			t.Fatalf("%q parses as chunk %d, past 31 bits", name, n)
		}
	})
}
