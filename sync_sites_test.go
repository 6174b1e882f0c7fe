package sessionstore

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncSite is a call in the store's code that makes something durable: a
// file's Sync or a SyncDir.
type syncSite struct {
	file       string // slash-separated, relative to the module root
	fn         string // the declaration line of the function holding it
	call       string // the call's text
	line       int
	start, end int // the call's byte offsets in the file
}

func (s syncSite) String() string {
	return fmt.Sprintf("%s:%d %s (in %s)", s.file, s.line, s.call, s.fn)
}

// syncSites returns every sync site of the package's code and of the
// internal packages below it (but internal/vfs, which implements the
// syncs): each call of a method Sync without arguments or of SyncDir,
// outside test files.
func syncSites(t *testing.T) []syncSite {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	internal, err := filepath.Glob(filepath.Join("internal", "*", "*.go"))
	require.NoError(t, err)
	var sites []syncSite
	for _, path := range append(files, internal...) {
		path = filepath.ToSlash(path)
		if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "internal/vfs/") {
			continue
		}
		src, err := os.ReadFile(filepath.FromSlash(path))
		require.NoError(t, err)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		require.NoError(t, err, path)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			declStart := fset.Position(fd.Pos()).Offset
			decl := string(src[declStart:])
			decl = decl[:strings.IndexByte(decl, '\n')]
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := c.Fun.(*ast.SelectorExpr)
				if !ok || !(sel.Sel.Name == "Sync" && len(c.Args) == 0 || sel.Sel.Name == "SyncDir") {
					return true
				}
				start, end := fset.Position(c.Pos()).Offset, fset.Position(c.End()).Offset
				sites = append(sites, syncSite{file: path, fn: decl, call: string(src[start:end]),
					line: fset.Position(c.Pos()).Line, start: start, end: end})
				return true
			})
		}
	}
	return sites
}

// span returns the byte range of the text m changes in src: the same
// text apply replaces.
func (m mutation) span(src []byte) (start, end int, ok bool) {
	fn := bytes.Index(src, []byte("\n"+m.in))
	if fn < 0 {
		return 0, 0, false
	}
	fn++
	fnEnd := bytes.Index(src[fn:], []byte("\n}\n"))
	if fnEnd < 0 {
		return 0, 0, false
	}
	i := bytes.Index(src[fn:fn+fnEnd], []byte(m.old))
	if i < 0 {
		return 0, 0, false
	}
	return fn + i, fn + i + len(m.old), true
}

// TestSyncSitesMutated: every sync site of the store's code is removed by
// a mutation of its own (the text a mutation changes covers the call),
// so that TestMutations, which requires every mutation caught, fails for
// a sync whose loss no test notices. A new Sync or SyncDir fails this
// test until it has its mutation, and then TestMutations until a test
// checks what it makes durable.
func TestSyncSitesMutated(t *testing.T) {
	sites := syncSites(t)
	require.NotEmpty(t, sites)
	srcs := map[string][]byte{}
	covered := 0
	for _, s := range sites {
		if srcs[s.file] == nil {
			b, err := os.ReadFile(filepath.FromSlash(s.file))
			require.NoError(t, err)
			srcs[s.file] = b
		}
		by := slices.IndexFunc(mutations, func(m mutation) bool {
			if m.file != s.file {
				return false
			}
			start, end, ok := m.span(srcs[s.file])
			return ok && start <= s.start && s.end <= end
		})
		if assert.GreaterOrEqual(t, by, 0, "no mutation removes the sync at %s: add one to mutations (mutation_test.go), and a test that fails without the sync", s) {
			covered++
		}
	}
	t.Logf("%d sync sites, %d with a mutation", len(sites), covered)
}
