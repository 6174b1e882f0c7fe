package sessionstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var record = flag.Bool("record", false, "re-record testdata/transcripts/recorded-session.jsonl from this repository")

// recordedTranscript is a coding-agent session recorded on this repository
// (see recordTranscript): every tool result is the real output of the tool
// it names, at the time of recording.
var recordedTranscript = filepath.Join("testdata", "transcripts", "recorded-session.jsonl")

// transcriptLine is one event of a transcript file: what a harness passes
// to Append.
type transcriptLine struct {
	Kind   Kind            `json:"kind"`
	Role   Role            `json:"role,omitempty"`
	Record json.RawMessage `json:"record"`
}

// loadTranscript reads a transcript file into events ready for Append.
func loadTranscript(tb testing.TB, path string) []Event {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out []Event
	for sc.Scan() {
		var l transcriptLine
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &l))
		out = append(out, Event{Kind: l.Kind, Role: l.Role, Record: l.Record})
	}
	require.NoError(tb, sc.Err())
	return out
}

// recordTranscript plays a scripted agent over this repository: for each
// source file, a user asks about it, the assistant reads it (real file
// content), greps for its declarations (real matches), sometimes looks at
// the history (real git log) and runs the package's vet (real output), and
// answers. The answers are templated; the tool results are real.
func recordTranscript(t *testing.T) []transcriptLine {
	var files []string
	for _, pattern := range []string{"*.go", "internal/*/*.go", "examples/*/*.go"} {
		m, err := filepath.Glob(pattern)
		require.NoError(t, err)
		files = append(files, m...)
	}
	sort.Strings(files)
	decl := regexp.MustCompile(`(?m)^(func|type|var|const) .*$`)
	var out []transcriptLine
	add := func(kind Kind, role Role, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out = append(out, transcriptLine{Kind: kind, Role: role, Record: b})
	}
	run := func(name string, args ...string) string {
		b, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return string(b) + "\n" + err.Error()
		}
		return string(b)
	}
	for i, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		add(KindMessage, RoleUser, Message{Content: fmt.Sprintf("Explain what %s does and check that it is consistent with the rest of the package.", file)})
		add(KindMessage, RoleAssistant, Message{Content: fmt.Sprintf("I will read %s first.", file), Reasoning: "Start from the file itself, then its declarations.", Usage: &Usage{InputTokens: int64(2000 + 150*i), OutputTokens: 40}})
		call := func(name string, args any, output string) {
			id := fmt.Sprintf("call_%d_%d", i, len(out))
			a, err := json.Marshal(args)
			require.NoError(t, err)
			add(KindToolCall, RoleAssistant, ToolCall{CallID: id, Name: name, Arguments: a})
			add(KindToolResult, RoleTool, ToolResult{CallID: id, Output: output})
		}
		call("read_file", map[string]string{"path": file}, string(src))
		var lines []string
		for n, line := range strings.Split(string(src), "\n") {
			if decl.MatchString(line) {
				lines = append(lines, fmt.Sprintf("%s:%d:%s", file, n+1, line))
			}
		}
		call("grep", map[string]string{"pattern": "^(func|type|var|const) ", "path": file}, strings.Join(lines, "\n"))
		if i%4 == 0 {
			call("git_log", map[string]string{"path": file}, run("git", "log", "--stat", "-n", "3", "--", file))
		}
		if i%3 == 0 {
			call("go_vet", map[string]string{"pkg": "./" + filepath.Dir(file)}, run("go", "vet", "-v", "./"+filepath.Dir(file)))
		}
		add(KindMessage, RoleAssistant, Message{Content: fmt.Sprintf("%s declares %d top-level names; its doc comments match what the code does.", file, len(lines))})
	}
	return out
}

// TestRecordedTranscript checks the committed transcript loads and appends
// whole; with -record it is re-recorded first.
func TestRecordedTranscript(t *testing.T) {
	if *record {
		lines := recordTranscript(t)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for _, l := range lines {
			require.NoError(t, enc.Encode(l))
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(recordedTranscript), 0o755))
		require.NoError(t, os.WriteFile(recordedTranscript, buf.Bytes(), 0o644))
	}
	evs := loadTranscript(t, recordedTranscript)
	require.Greater(t, len(evs), 200)
	results := 0
	for _, ev := range evs {
		if ev.Kind == KindToolResult {
			results++
		}
	}
	assert.Greater(t, results, 80)
	_, s, id := memSession(t, Options{})
	defer s.Close()
	for _, ev := range evs {
		_, err := s.Append(t.Context(), id, ev)
		require.NoError(t, err)
	}
	path, err := s.Load(t.Context(), id)
	require.NoError(t, err)
	require.Len(t, path, len(evs))
	for i := range evs {
		assert.JSONEq(t, string(evs[i].Record), string(path[i].Record))
	}
}
