package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const synthetic = `
# a comment
top:    cmd app
middle: . lib
bottom: base future(planned)
`

func TestParse(t *testing.T) {
	ls, err := Parse(synthetic)
	require.NoError(t, err)
	assert.Equal(t, []Layer{
		{Name: "top", Packages: []string{"cmd", "app"}},
		{Name: "middle", Packages: []string{".", "lib"}},
		{Name: "bottom", Packages: []string{"base", "future"}, Planned: []string{"future"}},
	}, ls)
}

func TestParseRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"no colon":       "top cmd\n",
		"no package":     "top:\n",
		"named twice":    "top: a\nbottom: a\n",
		"twice in layer": "top: a a\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(text)
			assert.Error(t, err)
		})
	}
}

func TestCheck(t *testing.T) {
	ls, err := Parse(synthetic)
	require.NoError(t, err)
	good := []Package{
		{Path: "cmd", Imports: []string{".", "base"}},
		{Path: "app", Imports: []string{"lib"}},
		{Path: ".", Imports: []string{"base", "."}},
		{Path: "lib"},
		{Path: "base"},
	}
	tests := []struct {
		name string
		edit func([]Package) []Package
		want []string // substrings of the breaches, in order
	}{
		{"the order kept", func(p []Package) []Package { return p }, nil},
		{"an import upward", func(p []Package) []Package {
			p[4].Imports = []string{"."}
			return p
		}, []string{"base (bottom) imports . of the layer above it (middle)"}},
		{"an import two layers up", func(p []Package) []Package {
			p[4].Imports = []string{"app"}
			return p
		}, []string{"base (bottom) imports app of the layer above it (top)"}},
		{"an import within a layer", func(p []Package) []Package {
			p[2].Imports = []string{"lib"}
			return p
		}, []string{". (middle) imports lib of its own layer"}},
		{"a package in no layer", func(p []Package) []Package {
			return append(p, Package{Path: "stray", Imports: []string{"base"}})
		}, []string{"package stray is in no layer"}},
		{"a named package missing", func(p []Package) []Package {
			return p[:4]
		}, []string{"package base of layer bottom is not in the module"}},
		{"a planned package made", func(p []Package) []Package {
			return append(p, Package{Path: "future"})
		}, nil},
		{"a planned package importing upward", func(p []Package) []Package {
			return append(p, Package{Path: "future", Imports: []string{"lib"}})
		}, []string{"future (bottom) imports lib of the layer above it (middle)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkgs := tt.edit(clone(good))
			errs := Check(ls, pkgs)
			require.Len(t, errs, len(tt.want), "%v", errs)
			for i, w := range tt.want {
				assert.Contains(t, errs[i].Error(), w)
			}
		})
	}
}

func clone(pkgs []Package) []Package {
	out := make([]Package, len(pkgs))
	for i, p := range pkgs {
		out[i] = Package{Path: p.Path, Imports: append([]string(nil), p.Imports...)}
	}
	return out
}

// TestModule checks the module's packages, as `go list` reports them
// (imports of the packages and of their tests), against Map.
func TestModule(t *testing.T) {
	ls, err := Parse(Map)
	require.NoError(t, err)
	pkgs := modulePackages(t)
	require.NotEmpty(t, pkgs)
	for _, err := range Check(ls, pkgs) {
		t.Error(err)
	}
}

// modulePackages lists the module's packages with `go list`, with the
// module's imports of each package and its tests, relative to the module.
func modulePackages(t *testing.T) []Package {
	t.Helper()
	out, err := exec.Command("go", "list", "-m").Output()
	require.NoError(t, err, "go list -m")
	module := strings.TrimSpace(string(out))
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...")
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		path, ok := rel(p.ImportPath)
		require.True(t, ok, "%s is outside module %s", p.ImportPath, module)
		pkg := Package{Path: path}
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if r, ok := rel(imp); ok {
				pkg.Imports = append(pkg.Imports, r)
			}
		}
		pkgs = append(pkgs, pkg)
	}
	return pkgs
}
