package anthropicadapter

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

// The recorded session maps to a request that keeps to the API's rules,
// every result sent.
func TestRecordedSession(t *testing.T) {
	evs := loadRecorded(t)
	var results int
	for _, ev := range evs {
		if ev.Kind == sessionstore.KindToolResult {
			results++
		}
	}
	require.Positive(t, results)
	msgs, err := Messages(evs)
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	checkAPIRules(t, got)
	sent := 0
	for _, m := range got {
		for _, b := range blocks(m) {
			if b["type"] == "tool_result" {
				sent++
			}
		}
	}
	assert.Equal(t, results, sent)
}

func BenchmarkMessagesRecorded(b *testing.B) {
	evs := loadRecorded(b)
	var size int64
	for _, ev := range evs {
		size += int64(len(ev.Record))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		msgs, err := Messages(evs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(msgs)
	}
	b.ReportMetric(float64(n), "messages/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}
