package export

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// The provider state of a session's records: JSON with white space a
// compaction to compact JSON would remove, bytes that are not UTF-8, and
// a record large enough to be a blob.
var (
	stateThinking = sessionstore.ProviderState{Provider: "anthropic", Type: "thinking", Data: []byte("{ \"type\": \"thinking\",\n  \"thinking\": \"t\", \"signature\": \"sig-secret\" }")}
	stateReason   = sessionstore.ProviderState{Provider: "openai", Type: "reasoning", Data: []byte(`{"type":"reasoning","id":"rs_1","encrypted_content":"gAAAA-secret"}`)}
	stateSig      = sessionstore.ProviderState{Provider: "gemini", Type: "thought_signature", Data: []byte{0xff, 0x00, 0xfe, 's', 'i', 'g'}}
)

// stateSession writes a session whose turns carry provider state: one
// inline, one stored as a blob (its text over the threshold).
func stateSession(t *testing.T, st *sessionstore.Store) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "state"})
	require.NoError(t, err)
	call := sessionstore.ToolCall{CallID: "c1", Name: "read", Arguments: json.RawMessage(`{"p":1}`), ProviderState: []sessionstore.ProviderState{stateSig, stateReason}}
	_, err = st.AppendBatch(ctx, meta.ID,
		sessionstore.UserText("read"),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "Reading.", ProviderState: []sessionstore.ProviderState{stateThinking}, ToolCalls: []sessionstore.ToolCall{call}}),
		sessionstore.ToolCallEvent(call),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "A"}),
		sessionstore.AssistantMessage(sessionstore.Message{Content: strings.Repeat("long answer ", 100), ProviderState: []sessionstore.ProviderState{stateReason, stateSig}}),
	)
	require.NoError(t, err)
	return meta.ID
}

// states returns the provider state of each event that has any, in
// order: the message's, then each call's.
func states(t *testing.T, evs []sessionstore.Event) [][]sessionstore.ProviderState {
	t.Helper()
	var out [][]sessionstore.ProviderState
	for _, ev := range evs {
		switch ev.Kind {
		case sessionstore.KindMessage:
			m, err := ev.Message()
			require.NoError(t, err)
			out = append(out, m.ProviderState)
			for _, c := range m.ToolCalls {
				out = append(out, c.ProviderState)
			}
		case sessionstore.KindToolCall:
			c, err := ev.ToolCall()
			require.NoError(t, err)
			out = append(out, c.ProviderState)
		}
	}
	return out
}

// JSONL, read back with NewReader and appended to another store, gives
// every record's provider state back byte for byte, blobs inline or as
// files.
func TestProviderStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	session := stateSession(t, st)
	orig, err := st.Load(ctx, session)
	require.NoError(t, err)
	require.NotEmpty(t, orig[4].Digest, "the long message is a blob")
	want := states(t, orig)
	require.Equal(t, [][]sessionstore.ProviderState{nil, {stateThinking}, {stateSig, stateReason}, {stateSig, stateReason}, {stateReason, stateSig}}, want)

	for _, blobDir := range []string{"", t.TempDir()} {
		var buf bytes.Buffer
		_, err := JSONL(ctx, &buf, st, session, Options{BlobDir: blobDir})
		require.NoError(t, err)
		rd, err := NewReader(&buf, "export.jsonl")
		require.NoError(t, err)
		var read []sessionstore.Event
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			if ev.Record == nil {
				ev.Record, err = ReadBlob(blobDir, ev)
				require.NoError(t, err)
			}
			read = append(read, ev)
		}
		require.Len(t, read, len(orig))
		for i := range orig {
			assert.Equal(t, string(orig[i].Record), string(read[i].Record), "event %d's record, blobs in %q", i, blobDir)
		}
		assert.Equal(t, want, states(t, read), "blobs in %q", blobDir)

		// Imported into another store, the state is the same.
		other := openStore(t)
		m, err := other.Create(ctx, sessionstore.Meta{})
		require.NoError(t, err)
		fresh := make([]sessionstore.Event, len(read))
		for i, ev := range read {
			fresh[i] = sessionstore.Event{Kind: ev.Kind, Role: ev.Role, Record: ev.Record}
		}
		_, err = other.AppendBatch(ctx, m.ID, fresh...)
		require.NoError(t, err)
		back, err := other.Load(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, want, states(t, back), "imported, blobs in %q", blobDir)
	}
}

// A Markdown transcript never shows provider state, in any form.
func TestProviderStateNotInMarkdown(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	session := stateSession(t, st)
	for _, opts := range []Options{{}, {Full: true}, {Scope: Context}} {
		var buf bytes.Buffer
		_, err := Markdown(ctx, &buf, st, session, opts)
		require.NoError(t, err)
		out := buf.String()
		require.Contains(t, out, "Reading.")
		for _, s := range []sessionstore.ProviderState{stateThinking, stateReason, stateSig} {
			assert.NotContains(t, out, base64.StdEncoding.EncodeToString(s.Data))
			assert.NotContains(t, out, string(s.Data))
		}
		for _, secret := range []string{"sig-secret", "gAAAA-secret", "provider_state", "thought_signature"} {
			assert.NotContains(t, out, secret)
		}
	}
}
