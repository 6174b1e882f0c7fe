package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Signed thinking and redacted thinking blocks are kept for the provider,
// each block's JSON as the transcript holds it, in block order, stored
// and loaded byte for byte, and none of it is the message's text.
func TestThinkingBlocksAreProviderState(t *testing.T) {
	signed := `{"type":"thinking","thinking":"Let me <check> the file.","signature":"EpAxClkIDBgCKkCk+/=="}`
	redacted := `{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}`
	unsigned := `{"type":"thinking","thinking":"no signature"}`
	line := `{"type":"assistant","uuid":"a","parentUuid":null,"sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"id":"msg_1","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		signed + `,` + redacted + `,` + unsigned + `,{"type":"text","text":"Done."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"a.go"}}]}}`
	path := writeLines(t, t.TempDir(), "s", line)
	f, err := Read(path)
	require.NoError(t, err)
	require.Empty(t, f.Errors)
	evs := f.Sessions[0].Events
	require.Len(t, evs, 2)
	m, err := evs[0].Message()
	require.NoError(t, err)
	want := []sessionstore.ProviderState{
		{Provider: "anthropic", Type: "thinking", Data: []byte(signed)},
		{Provider: "anthropic", Type: "redacted_thinking", Data: []byte(redacted)},
	}
	assert.Equal(t, want, m.ProviderState)
	assert.Equal(t, "Done.", m.Content)
	assert.Equal(t, "Let me <check> the file.\n\nno signature", m.Reasoning)
	for _, text := range []string{m.Content, m.Reasoning} {
		assert.NotContains(t, text, "EpAxClkI")
		assert.NotContains(t, text, "EmwKAhgB")
	}
	c, err := evs[1].ToolCall()
	require.NoError(t, err)
	assert.Empty(t, c.ProviderState, "Anthropic's state is the message's")

	st := openStore(t)
	_, err = Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	loaded, err := st.Load(context.Background(), f.Sessions[0].Meta.ID)
	require.NoError(t, err)
	lm, err := loaded[0].Message()
	require.NoError(t, err)
	assert.Equal(t, want, lm.ProviderState, "stored and loaded byte for byte")
}

// In the shared transcripts every signed thinking block becomes provider
// state whose Data is the block as the line holds it.
func TestThinkingBlocksRealData(t *testing.T) {
	blocks, states := 0, 0
	for _, path := range transcripts(t, sharedData(t)) {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, line := range bytes.Split(data, []byte("\n")) {
			var r struct {
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(line, &r) != nil || len(r.Message.Content) == 0 || r.Message.Content[0] != '[' {
				continue
			}
			var bs []struct {
				Type      string `json:"type"`
				Signature string `json:"signature"`
			}
			require.NoError(t, json.Unmarshal(r.Message.Content, &bs))
			for _, b := range bs {
				if b.Type == "thinking" && b.Signature != "" || b.Type == "redacted_thinking" {
					blocks++
				}
			}
		}
		f, err := Read(path)
		require.NoError(t, err)
		for _, s := range f.Sessions {
			for _, ev := range s.Events {
				if ev.Kind != sessionstore.KindMessage || ev.Role != sessionstore.RoleAssistant {
					continue
				}
				m, err := ev.Message()
				require.NoError(t, err)
				for _, ps := range m.ProviderState {
					states++
					assert.Equal(t, "anthropic", ps.Provider)
					assert.True(t, bytes.Contains(data, ps.Data), "%s: the block as the line holds it", path)
					assert.True(t, strings.HasPrefix(string(ps.Data), `{"type":"`+ps.Type+`"`))
				}
			}
		}
	}
	assert.Positive(t, blocks)
	assert.Equal(t, blocks, states, "one state a block (a line is read once)")
}
