package eventline

import (
	"bytes"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIndexLineCanonical checks the decoder accepts only the layout the
// encoder writes.
func TestIndexLineCanonical(t *testing.T) {
	content, want := indexFixture(t)
	line := content[:len(content)-1]
	got, err := DecodeIndex(line)
	require.NoError(t, err)
	assert.Equal(t, want[0], got)

	reseal := func(obj string) []byte {
		sealed := jsonl.Seal(nil, []byte(obj))
		return sealed[:len(sealed)-1]
	}
	body := string(line[:len(line)-18]) + "}"
	cases := map[string]string{
		"space after colon":   strings.Replace(body, `"size":`, `"size": `, 1),
		"reordered members":   strings.Replace(body, `{"id"`, `{"x":1,"id"`, 1),
		"upper-case id":       strings.Replace(body, want[0].ID.String(), strings.ToUpper(want[0].ID.String()), 1),
		"leading zero":        strings.Replace(body, `"chunk":0`, `"chunk":00`, 1),
		"negative offset":     strings.Replace(body, `"offset":0`, `"offset":-1`, 1),
		"offset past int64":   strings.Replace(body, `"offset":0`, `"offset":9999999999999999999`, 1),
		"offset past 2^62":    strings.Replace(body, `"offset":0`, `"offset":4611686018427387905`, 1),
		"chunk past 2^31":     strings.Replace(body, `"chunk":0`, `"chunk":2147483648`, 1),
		"size of 20 digits":   strings.Replace(body, `"size":`, `"size":10000000000000000000`, 1),
		"zero length":         strings.Replace(body, `"length":100`, `"length":0`, 1),
		"unknown kind":        strings.Replace(body, `"kind":"message"`, `"kind":"note"`, 1),
		"empty role":          strings.Replace(body, `"role":"user"`, `"role":""`, 1),
		"trailing member":     strings.Replace(body, `}}`, `},"extra":1}`, 1),
		"branch_from differs": strings.Replace(body, `","kind"`, `","branch_from":"`+uuid.NewString()+`","kind"`, 1),
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, body, obj, "the case must change the line")
			_, err := DecodeIndex(reseal(obj))
			assert.Error(t, err)
		})
	}
}

// FuzzDecodeIndexLine feeds arbitrary lines to the index decoder, seeded
// with the lines of testdata/golden, with and without their previews, and
// with sealed ones. A line it accepts must survive an
// encode/decode round trip unchanged.
func FuzzDecodeIndexLine(f *testing.F) {
	for _, line := range goldenLines(f, "index.jsonl") {
		f.Add(line)
		f.Add(line[:len(line)/2])
		f.Add(bytes.Replace(line, []byte(`"chunk":`), []byte(`"chunk":-`), 1))
		f.Add(bytes.Replace(line, []byte(`,"preview":"`), []byte(`,"preview":"\\\"`), 1))
		if e, err := DecodeIndex(line); err == nil {
			// The same line as a build before previews wrote it.
			e.Preview = Preview{}
			old := AppendIndex(nil, &e)
			f.Add(old[:len(old)-1])
			// With a sealed preview, as an encrypted session writes it.
			e.Preview, _ = SealedPreview([]byte("\x00\x00\x00\x01 nonce, cipher text and tag"))
			sealed := AppendIndex(nil, &e)
			f.Add(sealed[:len(sealed)-1])
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"x","crc":"00000000"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := DecodeIndex(line)
		if err != nil {
			return
		}
		enc := AppendIndex(nil, &e)
		require.Equal(t, byte('\n'), enc[len(enc)-1])
		again, err := DecodeIndex(enc[:len(enc)-1])
		require.NoError(t, err)
		assert.Equal(t, e, again)
		assert.NotZero(t, e.Loc.Length)
	})
}

// FuzzDecodeEvent feeds arbitrary lines to the chunk record decoder, seeded
// with the lines of the golden chunks.
func FuzzDecodeEvent(f *testing.F) {
	for _, line := range goldenLines(f, ".jsonl") {
		f.Add(line)
		f.Add(line[:len(line)-3])
	}
	f.Add([]byte(`{"record":{"a":[1,2,{"b":"}"}]},"crc":"00000000"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		h, p, err := DecodeEvent(line)
		if err != nil {
			return
		}
		require.NotZero(t, h.Kind, "a known kind")
		require.Equal(t, p.Blob, p.Record == nil)
		if !p.Blob {
			require.Equal(t, int64(len(p.Record)), p.Size)
		}
		enc := AppendEvent(nil, &h, p)
		h2, p2, err := DecodeEvent(enc[:len(enc)-1])
		require.NoError(t, err)
		assert.Equal(t, h, h2)
		assert.Equal(t, p.Blob, p2.Blob)
		assert.Equal(t, p.Digest, p2.Digest)
		assert.Equal(t, p.Size, p2.Size)
		assert.Equal(t, p.ParentAt, p2.ParentAt)
		assert.Equal(t, string(p.Record), string(p2.Record))
	})
}

// longestHeader is a header whose every member takes the most bytes its
// format allows.
func longestHeader() Header {
	id := uuid.MustParse("ffffffff-ffff-7fff-bfff-ffffffffffff")
	longest := func(n int, name func(int) string) (best int) {
		for i := range n {
			if len(name(i)) > len(name(best)) {
				best = i
			}
		}
		return best
	}
	k := longest(len(kindNames), func(i int) string { return kindNames[i] })
	r := longest(len(roleNames), func(i int) string { return roleNames[i] })
	return Header{ID: id, ParentID: id, BranchFrom: id, Time: math.MinInt64 + 1, Kind: KindCode(k), Role: RoleCode(r)}
}

// TestIndexLineLimit: the longest index line (longest header, a blob's
// digest, a preview of quotes, each escaped, the largest numbers) is
// within MaxIndexLine, so that the limit refuses no line the store
// writes.
func TestIndexLineLimit(t *testing.T) {
	for _, blob := range []bool{true, false} {
		// A blob's line is short; an inline record's as long as a line
		// can be.
		e := Entry{Header: longestHeader(), Size: MaxRecordSize, Blob: blob, Loc: Location{Chunk: 1<<31 - 1, Offset: 1 << 62, Length: MaxChunkLine + 1}}
		if blob {
			e.Loc.Length = MaxLineOverhead + 1
			for i := range e.Digest {
				e.Digest[i] = 0xff
			}
		}
		e.Preview.n = PreviewMax
		for i := range e.Preview.b {
			e.Preview.b[i] = '"'
		}
		line := AppendIndex(nil, &e)
		t.Logf("the longest index line (blob %v): %d bytes", blob, len(line)-1)
		assert.LessOrEqual(t, len(line)-1, MaxIndexLine)
		_, err := DecodeIndex(line[:len(line)-1])
		assert.NoError(t, err, "and it decodes")
	}
}

// TestChunkLineLimit: what a chunk line holds besides its inline record
// (the longest header and parent location, or a blob's digest and size)
// is within MaxLineOverhead.
func TestChunkLineLimit(t *testing.T) {
	h := longestHeader()
	at := Location{Chunk: 1<<31 - 1, Offset: 1 << 62, Length: MaxChunkLine + 1}
	blob := Payload{Blob: true, Size: MaxRecordSize, ParentAt: at}
	line := AppendEvent(nil, &h, blob)
	t.Logf("the longest blob reference line: %d bytes", len(line)-1)
	assert.LessOrEqual(t, len(line)-1, MaxLineOverhead)
	rec := []byte(`{"content":"x"}`)
	line = AppendEvent(nil, &h, Payload{Record: rec, Size: int64(len(rec)), ParentAt: at})
	assert.LessOrEqual(t, len(line)-1-len(rec), MaxLineOverhead)
}

// indexFixture returns an index line (with its newline) and its entry.
func indexFixture(t *testing.T) ([]byte, []Entry) {
	t.Helper()
	e := Entry{Header: Header{ID: uuid.Must(uuid.NewV7()), Kind: KindMessage, Role: RoleUser, Time: time.Now().UnixNano()}, Loc: Location{Length: 100}}
	return AppendIndex(nil, &e), []Entry{e}
}

// goldenLines returns the lines of the files of the root package's golden
// store (testdata/golden) whose names end in suffix, without their
// newlines.
func goldenLines(t testing.TB, suffix string) [][]byte {
	t.Helper()
	var out [][]byte
	root := filepath.Join("..", "..", "testdata", "golden")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, suffix) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if line != "" {
				out = append(out, []byte(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out, "golden files ending in %s", suffix)
	return out
}

// TestIndexLineLengthBound: an index line naming a chunk line longer than
// its record and the rest of a line can be, with its checksum right, is a
// bad line (read no further).
func TestIndexLineLengthBound(t *testing.T) {
	e := Entry{Header: longestHeader(), Size: 10, Loc: Location{Length: 10 + MaxLineOverhead + 2}}
	line := AppendIndex(nil, &e)
	_, err := DecodeIndex(line[:len(line)-1])
	assert.ErrorContains(t, err, "record line of")
	e.Loc.Length--
	line = AppendIndex(nil, &e)
	_, err = DecodeIndex(line[:len(line)-1])
	assert.NoError(t, err)
}
