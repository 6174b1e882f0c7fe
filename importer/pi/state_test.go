package pi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What Pi keeps of a thinking block for the provider is provider state in
// the shapes the adapters send back, never text: Anthropic's blocks on
// the message, in block order; an OpenAI reasoning item on the tool call
// (announced and event) or the message it preceded; nothing for another
// API.
func TestThinkingSignaturesAreProviderState(t *testing.T) {
	item := `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan"}],"encrypted_content":"gAAAAB1"}`
	itemJSON := strings.ReplaceAll(item, `"`, `\"`)
	cases := []struct {
		name, api, provider, content string
		message                      []sessionstore.ProviderState
		call                         []sessionstore.ProviderState
	}{
		{
			name: "anthropic", api: "anthropic-messages", provider: "anthropic",
			content: `[{"type":"thinking","thinking":"Read <a> & b.","thinkingSignature":"EpAx+/=="},{"type":"thinking","thinking":"[Reasoning redacted]","thinkingSignature":"EmwK","redacted":true},{"type":"thinking","thinking":"unsigned"},{"type":"text","text":"Done."},{"type":"toolCall","id":"c1","name":"read","arguments":{}}]`,
			message: []sessionstore.ProviderState{
				{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type":"thinking","thinking":"Read <a> & b.","signature":"EpAx+/=="}`)},
				{Provider: "anthropic", Type: "redacted_thinking", Data: []byte(`{"type":"redacted_thinking","data":"EmwK"}`)},
			},
		},
		{
			name: "anthropic without an api", provider: "anthropic",
			content: `[{"type":"thinking","thinking":"t","thinkingSignature":"sig"}]`,
			message: []sessionstore.ProviderState{{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type":"thinking","thinking":"t","signature":"sig"}`)}},
		},
		{
			name: "openai before a call", api: "openai-responses", provider: "openai",
			content: `[{"type":"thinking","thinking":"Plan","thinkingSignature":"` + itemJSON + `"},{"type":"toolCall","id":"c1|fc_1","name":"read","arguments":{}}]`,
			call:    []sessionstore.ProviderState{{Provider: "openai", Type: "reasoning", Data: []byte(item)}},
		},
		{
			name: "openai before text", api: "openai-codex-responses", provider: "openai-codex",
			content: `[{"type":"thinking","thinking":"Plan","thinkingSignature":"` + itemJSON + `"},{"type":"text","text":"Done."},{"type":"toolCall","id":"c1","name":"read","arguments":{}}]`,
			message: []sessionstore.ProviderState{{Provider: "openai", Type: "reasoning", Data: []byte(item)}},
		},
		{
			name: "another api", api: "google-generative-ai", provider: "google",
			content: `[{"type":"thinking","thinking":"t","thinkingSignature":"c2ln"},{"type":"toolCall","id":"c1","name":"read","arguments":{},"thoughtSignature":"c2ln"}]`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entry := `{"type":"message","id":"a1","parentId":"u1","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","api":"` + tc.api + `","provider":"` + tc.provider + `","model":"m","content":` + tc.content + `}}` + "\n"
			if tc.api == "" {
				entry = strings.Replace(entry, `"api":"",`, "", 1)
			}
			path := filepath.Join(t.TempDir(), "s.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(hdr+entryLine("u1", "", "hi")+entry), 0o644))
			st := openStore(t)
			_, err := Import(context.Background(), st, []string{path}, nil)
			require.NoError(t, err)
			s, _, err := Read(path)
			require.NoError(t, err)
			evs, err := st.Load(context.Background(), s.Meta.ID)
			require.NoError(t, err)
			var msg *sessionstore.Message
			var calls []sessionstore.ToolCall
			for _, ev := range evs {
				switch ev.Kind {
				case sessionstore.KindMessage:
					if ev.Role == sessionstore.RoleAssistant {
						m, err := ev.Message()
						require.NoError(t, err)
						msg = &m
					}
				case sessionstore.KindToolCall:
					c, err := ev.ToolCall()
					require.NoError(t, err)
					calls = append(calls, c)
				}
			}
			require.NotNil(t, msg)
			assert.Equal(t, tc.message, msg.ProviderState)
			for _, text := range []string{msg.Content, msg.Reasoning} {
				assert.NotContains(t, text, "gAAAAB1")
				assert.NotContains(t, text, "EpAx")
			}
			if len(calls) > 0 {
				assert.Equal(t, tc.call, calls[0].ProviderState, "the call's event")
				assert.Equal(t, tc.call, msg.ToolCalls[0].ProviderState, "the announced call")
			}
		})
	}
}
