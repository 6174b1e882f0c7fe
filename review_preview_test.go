package sessionstore

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// hasPointers reports whether values of t hold a pointer the garbage
// collector would follow.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.UnsafePointer, reflect.String, reflect.Slice, reflect.Map,
		reflect.Chan, reflect.Func, reflect.Interface:
		return true
	}
	return false
}

// TestReviewEntryHoldsNoPointers: an index entry, preview included, holds
// no pointer, so the garbage collector does not scan a session's index.
func TestReviewEntryHoldsNoPointers(t *testing.T) {
	assert.False(t, hasPointers(reflect.TypeFor[entry]()))
	assert.True(t, hasPointers(reflect.TypeFor[struct {
		a int
		s string
	}]()), "the check sees a string")
}

// FuzzReviewPreviewMember: the preview member of an index line is JSON a
// standard decoder reads as the preview's text, and decodeIndexLine reads
// back the entry, for a preview of any text.
func FuzzReviewPreviewMember(f *testing.F) {
	for _, s := range []string{"a", `","location":{"chunk":9`, "\\\"\\", "\u2028\u2029x", "\x7f\u0085\u009f", "\xff\xfe", "é" + strings.Repeat("\u00e9", 50), `\u0000`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w previewBuilder
		w.text([]byte(s))
		p := w.p
		checkPreview(t, p.String())
		e := entry{header: header{ID: uuid.New(), Kind: 1}, Size: 1, Preview: p, Loc: location{Length: 1}}
		line := encodeIndexLine(nil, &e)
		var v struct {
			Preview *string `json:"preview"`
		}
		require.NoError(t, json.Unmarshal(line, &v), "%q", line)
		if p.n == 0 {
			assert.Nil(t, v.Preview, "no member for an empty preview")
		} else {
			require.NotNil(t, v.Preview)
			assert.Equal(t, p.String(), *v.Preview)
		}
		got, err := decodeIndexLine(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
	})
}

// TestReviewTornIndexLineInPreview: an index line cut inside its preview
// member (a crash) is rebuilt from its chunk line, with its preview.
func TestReviewTornIndexLineInPreview(t *testing.T) {
	ctx := context.Background()
	o := Options{Compression: CompressionNone}
	m, s, id := memSession(t, o)
	for _, text := range []string{"first message", "second message", `the "last" one, \ long enough to cut`} {
		_, err := s.Append(ctx, id, UserText(text))
		require.NoError(t, err)
	}
	want, err := s.Tree(ctx, id)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	path := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	at := strings.LastIndex(string(b), `"preview":"the \"last`)
	require.Positive(t, at)
	f, err := m.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(at+len(`"preview":"the \"la`))))
	require.NoError(t, f.Close())

	s = openMem(t, m, o)
	defer s.Close()
	got, err := s.Tree(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, `the "last" one, \ long enough to cut`, got[2].Preview)
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
