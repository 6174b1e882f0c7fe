// Package layers holds the layer order of the core module's packages, as
// data (layers.txt), and checks an import graph against it.
//
// The rule: a package imports only packages of the layers below its own,
// never one of its own layer or of a layer above; its tests keep the same
// rule. Every package of the module is in the map. Imports of packages
// outside the module (the standard library, dependencies) are not
// checked. TestModule runs the check on the module as `go list` reports
// it, so a wrong import fails `go test ./...` and CI.
//
// The package only reads: Parse and Check return what they find and
// change nothing.
package layers

import (
	"bufio"
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

// Map is the layer order of the core module: layers.txt, from the top
// down.
//
//go:embed layers.txt
var Map string

// plannedMark follows a package that the map names as part of the target
// and that need not exist yet.
const plannedMark = "(planned)"

// Layer is one layer of the map: its name and its packages' paths
// relative to the module ("." for the module's root package).
type Layer struct {
	Name     string
	Packages []string
	// Planned holds the packages of Packages marked "(planned)".
	Planned []string
}

// Parse reads a map: one layer a line, from the top down, as
// "name: pkg pkg ..."; "#" starts a comment line, blank lines are
// skipped. A package named twice, or a line without a colon, is an error.
func Parse(text string) ([]Layer, error) {
	var out []Layer
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, pkgs, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("layers: line %d: no colon after the layer's name", n)
		}
		l := Layer{Name: strings.TrimSpace(name)}
		for _, p := range strings.Fields(pkgs) {
			planned := strings.HasSuffix(p, plannedMark)
			p = strings.TrimSuffix(p, plannedMark)
			if at, dup := seen[p]; dup {
				return nil, fmt.Errorf("layers: line %d: %s is already in the map at line %d", n, p, at)
			}
			seen[p] = n
			l.Packages = append(l.Packages, p)
			if planned {
				l.Planned = append(l.Planned, p)
			}
		}
		if len(l.Packages) == 0 {
			return nil, fmt.Errorf("layers: line %d: layer %q names no package", n, l.Name)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// Package is one package of the graph Check reads: its path relative to
// the module ("." for the root) and the paths, relative to the module,
// of the module's packages it and its tests import.
type Package struct {
	Path    string
	Imports []string
}

// Check compares a module's packages with the map and returns every
// breach, in the order of pkgs: a package the map does not name, a
// package the map names (not planned) that pkgs lacks, an import of a
// package of the same layer or of a layer above. An import of a package
// the map does not name is reported under that package. A nil result
// means the graph keeps the order.
func Check(layers []Layer, pkgs []Package) []error {
	rank := map[string]int{}
	for i, l := range layers {
		for _, p := range l.Packages {
			rank[p] = i
		}
	}
	var errs []error
	present := map[string]bool{}
	for _, p := range pkgs {
		present[p.Path] = true
		from, ok := rank[p.Path]
		if !ok {
			errs = append(errs, fmt.Errorf("package %s is in no layer of the map", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			if imp == p.Path {
				continue // an external test package imports the package it tests
			}
			to, ok := rank[imp]
			switch {
			case !ok:
				// Reported as a package in no layer.
			case to == from:
				errs = append(errs, fmt.Errorf("%s (%s) imports %s of its own layer", p.Path, layers[from].Name, imp))
			case to < from:
				errs = append(errs, fmt.Errorf("%s (%s) imports %s of the layer above it (%s)", p.Path, layers[from].Name, imp, layers[to].Name))
			}
		}
	}
	for _, l := range layers {
		for _, p := range l.Packages {
			if !present[p] && !slices.Contains(l.Planned, p) {
				errs = append(errs, fmt.Errorf("package %s of layer %s is not in the module (mark it %s if it is yet to be made)", p, l.Name, plannedMark))
			}
		}
	}
	return errs
}
