package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/remote/s3test"
)

// TestMain lets the test binary be the example's workers too: run starts
// os.Executable() with "worker N DIR", as the example binary does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestExampleHandoff runs the example against a versitygw of its own and
// checks what it shows: worker 2 reads worker 1's events, worker 4 takes
// the session over from the killed worker 3 with its acknowledged tool
// call, and the log holds the markers the protocol writes, with no
// release by worker 3.
func TestExampleHandoff(t *testing.T) {
	srv := s3test.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, srv), "output so far:\n%s", out.String())
	text := out.String()
	t.Log("\n" + text)

	first := []string{
		"user      message     The build fails. Can you fix it?",
		"assistant tool_call   run_tests()",
		"tool      tool_result FAIL: TestParse (parse.go:42: unexpected EOF)",
		"assistant message     parse.go reads past the end of its input; I will fix the bounds check.",
	}
	assert.Equal(t, first, history(text, 2), "worker 2 loads worker 1's events from the bucket")
	assert.Equal(t, append(first,
		"user      message     Thanks. Run the linter too.",
		"assistant tool_call   run_linter()",
	), history(text, 4), "worker 4 has every event, worker 3's acknowledged tool call last")
	assert.Contains(t, text, "worker 2 | opened it at once, since worker 1 released it")
	assert.Contains(t, text, "worker 3 | "+readyLine+"\nkilled worker 3 (SIGKILL)")
	assert.Regexp(t, `worker 4 \| took the session over after \d+\.\ds`, text)
	assert.Contains(t, text, "worker 4 | tool call run_linter has no result")
	assert.Contains(t, text, "worker 4 | appended  tool      tool_result no issues")

	var markers []string
	data := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^  log object \d+ +(\w+) +worker (\d)$`).FindAllStringSubmatch(text, -1) {
		if m[1] == "data" {
			data[m[2]]++
		} else if m[1] != "meta" {
			markers = append(markers, m[1]+" "+m[2])
		}
	}
	assert.Equal(t, []string{"create 1", "release 1", "open 2", "release 2", "open 3", "open 4", "void 4", "void 4", "void 4", "release 4"}, markers,
		"each worker's Close releases; worker 3, killed, does not, so worker 4 fills the numbers its Creates in flight could take")
	assert.Equal(t, map[string]int{"1": 4, "2": 1, "3": 1, "4": 2}, data, "one data object per Append")
}

// history returns the events worker n printed as the session's history.
func history(text string, n int) []string {
	var out []string
	prefix := "  worker " + string(rune('0'+n)) + " |   "
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			_, ev, _ := strings.Cut(rest, ". ")
			out = append(out, ev)
		}
	}
	return out
}

// TestExampleWithoutVersitygw: with no binary, the example says how to
// install it and exits non-zero.
func TestExampleWithoutVersitygw(t *testing.T) {
	t.Setenv(s3test.EnvBinary, t.TempDir()+"/no-versitygw")
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, mainStatus(nil, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
	assert.Empty(t, stdout.String())
}
