package main

import (
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpExitsZero: every command's help, asked for by -h, -help, --help
// (before or after arguments) or "help <command>", is its usage on stdout
// with status 0, as Go's flag package exits; it lists the command's flags
// but not -h itself, and runs nothing.
func TestHelpExitsZero(t *testing.T) {
	root := t.TempDir() // no store: a command that ran would fail
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		for _, args := range [][]string{
			{name, "-h"},
			{name, "-help"},
			{name, "--help"},
			{name, root, "0123abcd", "-h"},
			{"help", name},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				status, stdout, stderr := runCmd(args...)
				assert.Equal(t, exitOK, status, "stderr: %s", stderr)
				assert.Empty(t, stderr)
				assert.Regexp(t, `^usage: sessionstore `+name+`[ \n]`, stdout)
				assert.NotContains(t, stdout, "  -h\n")
				assert.NotContains(t, stdout, "  -help\n")
			})
		}
	}

	// The flags are listed with their defaults as declared, whatever the
	// command line set.
	status, stdout, _ := runCmd("path", "-width", "7", "-h")
	require.Equal(t, exitOK, status)
	assert.Contains(t, stdout, "  -width n\n")
	assert.Contains(t, stdout, "(default 120)")

	// -h=false asks for nothing; a bad flag stays a bad command line.
	status, stdout, stderr := runCmd("tree", "-h=false")
	assert.Equal(t, exitUsage, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "missing arguments")
	status, stdout, stderr = runCmd("tree", "-nosuchflag", "-h")
	assert.Equal(t, exitUsage, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "flag provided but not defined: -nosuchflag")
}

// TestVersion: version prints the module version the build recorded.
func TestVersion(t *testing.T) {
	status, stdout, stderr := runCmd("version")
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	assert.Equal(t, "sessionstore "+buildVersion(debug.ReadBuildInfo())+"\n", stdout)

	status, stdout, _ = runCmd("version", "extra")
	assert.Equal(t, exitUsage, status)
	assert.Empty(t, stdout)
}

func TestBuildVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "(devel)"},
		{"no version", &debug.BuildInfo{}, true, "(devel)"},
		{"devel", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)"},
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Path: "github.com/sessionstore/sessionstore/cmd", Version: "v1.4.0"}}, true, "v1.4.0"},
		{"pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261204120000-abcdef123456+dirty"}}, true, "v0.0.0-20261204120000-abcdef123456+dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, buildVersion(tc.info, tc.ok))
		})
	}
}
