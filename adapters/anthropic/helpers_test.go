package anthropicadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// session is a store with one session, for tests.
type session struct {
	t  testing.TB
	st *sessionstore.Store
	id uuid.UUID
}

func newSession(t testing.TB, opts *sessionstore.Options) *session {
	t.Helper()
	st, err := sessionstore.Open(t.TempDir(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	m, err := st.Create(context.Background(), sessionstore.Meta{Name: "test"})
	require.NoError(t, err)
	return &session{t: t, st: st, id: m.ID}
}

func (s *session) append(evs ...sessionstore.Event) sessionstore.Event {
	s.t.Helper()
	out, err := s.st.AppendBatch(context.Background(), s.id, evs...)
	require.NoError(s.t, err)
	return out[len(out)-1]
}

func (s *session) load() []sessionstore.Event {
	s.t.Helper()
	evs, err := s.st.Load(context.Background(), s.id)
	require.NoError(s.t, err)
	return evs
}

func tc(id, name, args string) sessionstore.ToolCall {
	return sessionstore.ToolCall{CallID: id, Name: name, Arguments: json.RawMessage(args)}
}

func result(id, out string, isErr bool) sessionstore.Event {
	return sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: out, IsError: isErr})
}

// scenario records a session that has every case the mapping handles: a
// compaction, a turn with parallel calls (one result an error), an
// abandoned call, an empty assistant message, arguments that are not
// valid JSON, a result without its call, and a final answer. It returns what Load returns.
func scenario(t testing.TB) []sessionstore.Event {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("What is this repository?"))
	head := s.append(sessionstore.AssistantText("A Go library."))
	_, err := s.st.Compact(context.Background(), s.id, sessionstore.Compaction{
		Head:    head.ID,
		Summary: sessionstore.Summary{Text: "The user asked what the repository is.", Goals: []string{"fix the build"}},
	})
	require.NoError(t, err)
	s.append(sessionstore.UserText("Read a.go and b.go."))
	s.append(convo.Reply{Text: "Reading both.", Model: "gpt-test", ToolCalls: []sessionstore.ToolCall{
		tc("call_a", "read_file", `{"path":"a.go"}`), tc("call_b", "read_file", `{"path":"b.go"}`),
	}}.Events()...)
	s.append(result("call_a", "package a", false), result("call_b", "open b.go: no such file", true))
	s.append(convo.Reply{Model: "gpt-test", ToolCalls: []sessionstore.ToolCall{tc("call_c", "run", `{"cmd":"go test"}`)}}.Events()...)
	s.append(sessionstore.UserText("Stop, that takes too long."))
	s.append(sessionstore.AssistantText(""))
	s.append(sessionstore.UserText("Check a.go again."))
	s.append(convo.Reply{Model: "gpt-test", ToolCalls: []sessionstore.ToolCall{tc("call_d", "read_file", `"{\"path\": \"a.go\""`)}}.Events()...)
	s.append(result("call_d", "", false))
	s.append(result("call_stale", "a result whose call is not in the context", false))
	s.append(sessionstore.AssistantMessage(sessionstore.Message{Content: "a.go is package a.", Model: "gpt-test"}))
	return s.load()
}

// wire marshals v as the SDK sends it, then indents it for a golden file.
func wire(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, json.Indent(&out, b, "", "  "))
	out.WriteByte('\n')
	return out.Bytes()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), string(got))
}

// decode unmarshals the wire form into generic JSON for checks.
func decode(t testing.TB, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}
