package sessionstore

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// longestHeader is a header whose every member takes the most bytes its
// format allows.
func longestHeader() header {
	id := uuid.MustParse("ffffffff-ffff-7fff-bfff-ffffffffffff")
	longest := func(n int, name func(int) string) (best int) {
		for i := range n {
			if len(name(i)) > len(name(best)) {
				best = i
			}
		}
		return best
	}
	k := longest(len(kinds), func(i int) string { return string(kinds[i]) })
	r := longest(len(roles), func(i int) string { return string(roles[i]) })
	return header{ID: id, ParentID: id, BranchFrom: id, Time: math.MinInt64 + 1, Kind: kindCode(k), Role: roleCode(r)}
}

// TestIndexLineLimit: the longest index line (longest header, a blob's
// digest, a preview of quotes, each escaped, the largest numbers) is
// within maxIndexLine, so that the limit refuses no line the store
// writes.
func TestIndexLineLimit(t *testing.T) {
	for _, blob := range []bool{true, false} {
		// A blob's line is short; an inline record's as long as a line
		// can be.
		e := entry{header: longestHeader(), Size: maxRecordSizeLimit, Blob: blob, Loc: location{Chunk: 1<<31 - 1, Offset: 1 << 62, Length: maxChunkLine + 1}}
		if blob {
			e.Loc.Length = maxLineOverhead + 1
			for i := range e.Digest {
				e.Digest[i] = 0xff
			}
		}
		e.Preview.n = previewMax
		for i := range e.Preview.b {
			e.Preview.b[i] = '"'
		}
		line := encodeIndexLine(nil, &e)
		t.Logf("the longest index line (blob %v): %d bytes", blob, len(line)-1)
		assert.LessOrEqual(t, len(line)-1, maxIndexLine)
		_, err := decodeIndexLine(line[:len(line)-1])
		assert.NoError(t, err, "and it decodes")
	}
}

// TestChunkLineLimit: what a chunk line holds besides its inline record
// (the longest header and parent location, or a blob's digest and size)
// is within maxLineOverhead.
func TestChunkLineLimit(t *testing.T) {
	h := longestHeader()
	at := location{Chunk: 1<<31 - 1, Offset: 1 << 62, Length: maxChunkLine + 1}
	blob := payload{Blob: true, Size: maxRecordSizeLimit, ParentAt: at}
	line := encodeEventLine(nil, &h, blob)
	t.Logf("the longest blob reference line: %d bytes", len(line)-1)
	assert.LessOrEqual(t, len(line)-1, maxLineOverhead)
	rec := []byte(`{"content":"x"}`)
	line = encodeEventLine(nil, &h, payload{Record: rec, Size: int64(len(rec)), ParentAt: at})
	assert.LessOrEqual(t, len(line)-1-len(rec), maxLineOverhead)
}

// TestIndexLineLengthBound: an index line naming a chunk line longer than
// its record and the rest of a line can be, with its checksum right, is a
// bad line (read no further), and a location longer than any chunk line
// is refused before anything is read for it.
func TestIndexLineLengthBound(t *testing.T) {
	e := entry{header: longestHeader(), Size: 10, Loc: location{Length: 10 + maxLineOverhead + 2}}
	line := encodeIndexLine(nil, &e)
	_, err := decodeIndexLine(line[:len(line)-1])
	assert.ErrorContains(t, err, "record line of")
	e.Loc.Length--
	line = encodeIndexLine(nil, &e)
	_, err = decodeIndexLine(line[:len(line)-1])
	assert.NoError(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, chunkName(0)), []byte("{}\n"), 0o600))
	r := newChunkReader(vfs.Default, dir)
	defer r.close()
	n := allocated(func() {
		_, _, err = r.read(location{Length: maxChunkLine + 2})
	})
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Less(t, n, uint64(1<<20))
}

// TestEmbeddedIndexBound: a sealed chunk whose embedded index is larger
// than one index line per record of its chunk allows is damage, refused
// before the index is read.
func TestEmbeddedIndexBound(t *testing.T) {
	dir := t.TempDir()
	src := []byte(strings.Repeat("x", minChunkLine-1) + "\n")
	meta := bytes.Repeat([]byte("a"), maxIndexLine+2)
	path := filepath.Join(dir, chunkName(0)+sealedExt)
	require.NoError(t, zchunk.Write(vfs.Default, path, src, meta, 0o600))
	_, err := openSealedMeta(vfs.Default, dir, 0)
	corruptAt(t, err, path)
	assert.ErrorContains(t, err, "embedded index of")
}

// TestLanesFileLimit: the largest lanes file, MaxLanes lanes named with
// MaxLaneName bytes that JSON escapes the most, is within maxLanesSize.
func TestLanesFileLimit(t *testing.T) {
	ls := &laneSet{head: uuid.New(), lanes: map[string]laneTip{}}
	max := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	for i := range MaxLanes {
		name := strings.Repeat("<", MaxLaneName-4) + string(rune('A'+i%26)) + string(rune('A'+i/26%26)) + string(rune('A'+i/676)) + "<"
		require.NoError(t, checkLaneName(name))
		ls.lanes[name] = laneTip{tip: uuid.New(), set: max}
		ls.active = name
	}
	b, err := encodeLanes(ls)
	require.NoError(t, err)
	t.Logf("the largest lanes file: %d bytes", len(b))
	assert.LessOrEqual(t, len(b), maxLanesSize)
}

// bigMeta returns metadata whose session.json takes about n bytes, with
// strings JSON escapes the most.
func bigMeta(n int) Meta {
	created := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC) // the longest form
	return Meta{Name: "big", CreatedAt: created, UpdatedAt: created, Labels: map[string]string{"k": strings.Repeat("<", n/6)}}
}

// TestMetaSizeLimit: Create and UpdateMeta refuse metadata whose
// session.json would be longer than maxMetaSize (ErrInvalidMeta), and
// write nothing; metadata just within it is stored, read back, listed
// from the catalogue (whose line fits maxCatLine), and survives the
// rewrite of session.json a Close makes.
func TestMetaSizeLimit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Create(ctx, bigMeta(maxMetaSize+100))
	assert.ErrorIs(t, err, ErrInvalidMeta)
	ids, err := sessionIDs(vfs.Default, filepath.Join(root, sessionsDir))
	require.NoError(t, err)
	assert.Empty(t, ids, "nothing created")

	// The largest metadata Create takes.
	lo, hi := 0, maxMetaSize
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if checkMeta(bigMeta(mid)) == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	m, err := s.Create(ctx, bigMeta(lo))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(s.sessionDir(m.ID), metaFile))
	require.NoError(t, err)
	t.Logf("the largest session.json: %d bytes", len(b))
	assert.Greater(t, len(b), maxMetaSize-200)
	line := appendCatRecord(nil, catRecord{kind: kindCommit, id: m.ID, dir: stamp{math.MinInt64, math.MaxInt64}, file: stamp{math.MinInt64, math.MaxInt64}, meta: m})
	assert.LessOrEqual(t, len(line)-1, maxCatLine, "its catalogue line")

	_, err = s.Append(ctx, m.ID, UserText("x"))
	require.NoError(t, err)
	_, err = s.UpdateMeta(ctx, m.ID, func(m *Meta) { m.Labels["more"] = strings.Repeat("x", 1000) })
	assert.ErrorIs(t, err, ErrInvalidMeta)
	got, err := s.Meta(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, m.Labels, got.Labels, "unchanged")
	require.NoError(t, s.Close())

	s2, err := Open(root, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer s2.Close()
	metas, err := s2.List(ctx)
	require.NoError(t, err)
	require.Len(t, metas, 1)
	assert.Equal(t, m.Labels, metas[0].Labels)
}

// TestNoUnboundedReads: no file of the store's packages reads a file
// whole without the limit of its format: vfs.ReadFile (for tests and
// tools) and io.ReadAll are not called outside tests; every read names
// its limit (readFile, vfs.ReadFileLimit, vfs.ReadFileInto) or goes a
// block or a line at a time.
func TestNoUnboundedReads(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.go", "internal/*/*.go"} {
		m, err := filepath.Glob(pattern)
		require.NoError(t, err)
		files = append(files, m...)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, filepath.Join("internal", "vfs")) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if ok && (x.Name == "vfs" && sel.Sel.Name == "ReadFile" || x.Name == "io" && sel.Sel.Name == "ReadAll" || x.Name == "os" && sel.Sel.Name == "ReadFile") {
				t.Errorf("%s: %s.%s reads a file whole, whatever its size", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
			}
			return true
		})
	}
	assert.Greater(t, checked, 40)
}
