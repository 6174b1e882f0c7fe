package genai

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

func sigState(sig string) sessionstore.ProviderState {
	return sessionstore.ProviderState{Provider: "gemini", Type: "thought_signature", Data: []byte(sig)}
}

// signedJSON is a Gemini 3 response whose thought, text and calls are
// signed (the first call of two parallel ones, as the API signs them).
const signedJSON = `{"candidates":[{"content":{"role":"model","parts":[
	{"text":"Think.","thought":true,"thoughtSignature":"AAE="},
	{"text":"Reading ","thoughtSignature":"dGV4dA=="},{"text":"both."},
	{"functionCall":{"id":"c1","name":"read","args":{"path":"a.go"}},"thoughtSignature":"/wBzaWc="},
	{"functionCall":{"id":"c2","name":"read","args":{"path":"b.go"}}}]}}],
	"modelVersion":"gemini-3-pro","responseId":"r"}`

// Reply keeps each part's signature, a call's on the call and the others
// on the message, as the bytes the API sent; Contents sends each back on
// its part.
func TestReplyThoughtSignatures(t *testing.T) {
	var resp genai.GenerateContentResponse
	require.NoError(t, json.Unmarshal([]byte(signedJSON), &resp))
	r, err := Reply(&resp)
	require.NoError(t, err)
	assert.Equal(t, []sessionstore.ProviderState{sigState("\x00\x01"), sigState("text")}, r.ProviderState)
	require.Len(t, r.ToolCalls, 2)
	assert.Equal(t, []sessionstore.ProviderState{sigState("\xff\x00sig")}, r.ToolCalls[0].ProviderState)
	assert.Nil(t, r.ToolCalls[1].ProviderState)
	assert.Equal(t, "Reading both.", r.Text, "the state is never text")

	evs := cat(sessionstore.UserText("read"), r.Events(), result("c1", "A", false), result("c2", "B", false))
	got, err := Contents(ids(evs...))
	require.NoError(t, err)
	require.Len(t, got, 3)
	model := got[1].Parts
	require.Len(t, model, 3)
	assert.Equal(t, "Reading both.", model[0].Text)
	assert.Equal(t, []byte("text"), model[0].ThoughtSignature, "the message's last signature on its text part")
	assert.Equal(t, []byte("\xff\x00sig"), model[1].ThoughtSignature)
	assert.Nil(t, model[2].ThoughtSignature, "the API signs only the first of parallel calls")
	assert.Empty(t, geminiRules(got))
}

// Options.ThoughtSignature fills only what no stored signature does: the
// first call of a turn written without them.
func TestContentsWithStoredAndFallbackSignatures(t *testing.T) {
	signed := call("a", "f", `{}`)
	signed.ProviderState = []sessionstore.ProviderState{sigState("sig-a"),
		{Provider: "openai", Type: "reasoning", Data: []byte(`{"type":"reasoning"}`)}}
	evs := cat(sessionstore.UserText("x"), reply("", signed, call("b", "g", `{}`)), result("a", "A", false), result("b", "B", false),
		reply("", call("c", "h", `{}`), call("d", "i", `{}`)), result("c", "C", false), result("d", "D", false))
	got, err := ContentsWith(ids(evs...), &Options{ThoughtSignature: []byte("skip_thought_signature_validator")})
	require.NoError(t, err)
	sigs := map[string]string{}
	for _, c := range got {
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				sigs[p.FunctionCall.Name] = string(p.ThoughtSignature)
			}
		}
	}
	assert.Equal(t, map[string]string{"f": "sig-a", "g": "", "h": "skip_thought_signature_validator", "i": ""}, sigs)

	plain, err := Contents(ids(evs...))
	require.NoError(t, err)
	assert.Equal(t, []byte("sig-a"), plain[1].Parts[0].ThoughtSignature, "stored: sent without options")
	assert.Nil(t, plain[3].Parts[0].ThoughtSignature)
}

// A turn kept after a compaction still sends its calls' signatures.
func TestContentsSignatureAfterCompaction(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	m, err := st.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	var resp genai.GenerateContentResponse
	require.NoError(t, json.Unmarshal([]byte(signedJSON), &resp))
	r, err := Reply(&resp)
	require.NoError(t, err)
	_, err = st.AppendBatch(ctx, m.ID, sessionstore.UserText("Earlier."), sessionstore.AssistantText("Earlier answer."), sessionstore.UserText("read"))
	require.NoError(t, err)
	kept, err := st.AppendBatch(ctx, m.ID, r.Events()...)
	require.NoError(t, err)
	res, err := st.AppendBatch(ctx, m.ID, result("c1", "A", false), result("c2", "B", false))
	require.NoError(t, err)
	_, err = st.Compact(ctx, m.ID, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: kept[0].ID, Head: res[1].ID})
	require.NoError(t, err)
	evs, err := st.Load(ctx, m.ID)
	require.NoError(t, err)
	got, err := Contents(evs)
	require.NoError(t, err)
	require.Len(t, got, 3, "summary, the kept turn, its responses")
	assert.Equal(t, []byte("text"), got[1].Parts[0].ThoughtSignature)
	assert.Equal(t, []byte("\xff\x00sig"), got[1].Parts[1].ThoughtSignature)
}
