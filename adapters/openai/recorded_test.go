package openaiadapter

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedSession is the core module's recorded coding-agent session (real
// tool output, one tool call per assistant message): what a harness
// appends, one event per line.
var recordedSession = filepath.Join("..", "..", "testdata", "transcripts", "recorded-session.jsonl")

// loadRecorded appends the recorded session to a store and returns what
// Load returns.
func loadRecorded(tb testing.TB) []sessionstore.Event {
	tb.Helper()
	f, err := os.Open(recordedSession)
	require.NoError(tb, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var evs []sessionstore.Event
	for sc.Scan() {
		var l struct {
			Kind   sessionstore.Kind
			Role   sessionstore.Role
			Record json.RawMessage
		}
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &l))
		evs = append(evs, sessionstore.Event{Kind: l.Kind, Role: l.Role, Record: l.Record})
	}
	require.NoError(tb, sc.Err())
	require.NotEmpty(tb, evs)
	s := newSession(tb, nil)
	s.append(evs...)
	return s.load()
}

// The recorded session maps to requests whose every result follows its
// call, for both APIs.
func TestRecordedSession(t *testing.T) {
	evs := loadRecorded(t)
	var results int
	for _, ev := range evs {
		if ev.Kind == sessionstore.KindToolResult {
			results++
		}
	}
	require.Positive(t, results)

	msgs, err := ChatMessages(evs)
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	checkChatPairs(t, got)
	tools := 0
	for _, m := range got {
		if m["role"] == "tool" {
			tools++
		}
	}
	assert.Equal(t, results, tools)

	items, err := ResponsesInput(evs)
	require.NoError(t, err)
	outputs, open := 0, map[string]bool{}
	for i, it := range decode(t, wire(t, items)) {
		switch it["type"] {
		case "function_call":
			open[it["call_id"].(string)] = true
		case "function_call_output":
			assert.True(t, open[it["call_id"].(string)], "item %d", i)
			outputs++
		}
	}
	assert.Equal(t, results, outputs)
}
