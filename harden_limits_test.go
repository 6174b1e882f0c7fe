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

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// TestChunkReadLengthBound: a location longer than any chunk line is
// refused before anything is read for it (the index line naming one is
// refused by its decoder: internal/eventline's TestIndexLineLengthBound).
func TestChunkReadLengthBound(t *testing.T) {
	var err error
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, chunkName(0)), []byte("{}\n"), 0o600))
	r := newChunkReader(vfs.Default, dir, nil)
	defer r.close()
	n := allocated(func() {
		_, _, err = r.read(location{Length: eventline.MaxChunkLine + 2})
	})
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Less(t, n, uint64(1<<20))
}

// TestEmbeddedIndexBound: a sealed chunk whose embedded index is larger
// than one index line per record of its chunk allows is damage, refused
// before the index is read.
func TestEmbeddedIndexBound(t *testing.T) {
	dir := t.TempDir()
	src := []byte(strings.Repeat("x", eventline.MinChunkLine-1) + "\n")
	meta := bytes.Repeat([]byte("a"), eventline.MaxIndexLine+2)
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
// from the catalogue (whose line fits catalogue.MaxLine), and survives the
// rewrite of session.json a Close makes.
func TestMetaSizeLimit(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
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
	line := catalogue.AppendRecord(nil, catalogue.Record{Kind: catalogue.KindCommit, ID: m.ID, Dir: catalogue.Stamp{MTime: math.MinInt64, Size: math.MaxInt64}, File: catalogue.Stamp{MTime: math.MinInt64, Size: math.MaxInt64}, Meta: catMeta(m)})
	assert.LessOrEqual(t, len(line)-1, catalogue.MaxLine, "its catalogue line")

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
