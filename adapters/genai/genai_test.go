package genai

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

// ids gives each event an id, as the store would.
func ids(evs ...sessionstore.Event) []sessionstore.Event {
	for i := range evs {
		evs[i].ID = uuid.Must(uuid.NewV7())
	}
	return evs
}

func call(id, name, args string) sessionstore.ToolCall {
	c := sessionstore.ToolCall{CallID: id, Name: name}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
	return c
}

func result(id, out string, isErr bool) sessionstore.Event {
	return sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: out, IsError: isErr})
}

func reply(text string, calls ...sessionstore.ToolCall) []sessionstore.Event {
	return convo.Reply{Text: text, ToolCalls: calls}.Events()
}

func cat(parts ...any) []sessionstore.Event {
	var out []sessionstore.Event
	for _, p := range parts {
		switch p := p.(type) {
		case sessionstore.Event:
			out = append(out, p)
		case []sessionstore.Event:
			out = append(out, p...)
		}
	}
	return out
}

func content(role string, parts ...*genai.Part) *genai.Content {
	return &genai.Content{Role: role, Parts: parts}
}

func text(s string) *genai.Part { return &genai.Part{Text: s} }

func fcall(id, name string, args map[string]any) *genai.Part {
	return &genai.Part{FunctionCall: &genai.FunctionCall{ID: id, Name: name, Args: args}}
}

func fresp(id, name string, resp map[string]any) *genai.Part {
	return &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: id, Name: name, Response: resp}}
}

func TestContents(t *testing.T) {
	summary := sessionstore.Summary{Text: "We fixed the parser.", Unresolved: []string{"flaky test"}}
	derived := DerivedIDPrefix + "0123456789abcdef"
	tests := []struct {
		name   string
		events []sessionstore.Event
		want   []*genai.Content
	}{
		{
			name:   "plain turns",
			events: cat(sessionstore.UserText("hi"), sessionstore.AssistantMessage(sessionstore.Message{Content: "hello", Reasoning: "not sent"})),
			want:   []*genai.Content{content("user", text("hi")), content("model", text("hello"))},
		},
		{
			name: "parallel calls: their responses share one user content",
			events: cat(sessionstore.UserText("read both"), reply("reading", call("a", "read", `{"p":"a"}`), call("b", "grep", `{"q":"x","n":2}`)),
				result("a", "A", false), result("b", "B", false), sessionstore.AssistantText("done")),
			want: []*genai.Content{content("user", text("read both")),
				content("model", text("reading"), fcall("a", "read", map[string]any{"p": "a"}), fcall("b", "grep", map[string]any{"q": "x", "n": json.Number("2")})),
				content("user", fresp("a", "read", map[string]any{"output": "A"}), fresp("b", "grep", map[string]any{"output": "B"})),
				content("model", text("done"))},
		},
		{
			name: "results that arrive out of order go in the order of their calls",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`), call("b", "g", `{}`), call("c", "h", `{}`)),
				result("c", "C", false), result("a", "A", false), result("b", "B", false), sessionstore.UserText("and?")),
			want: []*genai.Content{content("user", text("x")),
				content("model", fcall("a", "f", map[string]any{}), fcall("b", "g", map[string]any{}), fcall("c", "h", map[string]any{})),
				content("user", fresp("a", "f", map[string]any{"output": "A"}), fresp("b", "g", map[string]any{"output": "B"}),
					fresp("c", "h", map[string]any{"output": "C"})), content("user", text("and?"))},
		},
		{
			name:   "an error result is under error",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "run", `{}`)), result("a", "exit 1", true)),
			want: []*genai.Content{content("user", text("x")), content("model", fcall("a", "run", map[string]any{})),
				content("user", fresp("a", "run", map[string]any{"error": "exit 1"}))},
		},
		{
			name:   "an abandoned call gets a synthetic error; the user's next words follow in a content of their own",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "run", "")), sessionstore.UserText("never mind")),
			want: []*genai.Content{content("user", text("x")), content("model", fcall("a", "run", nil)),
				content("user", fresp("a", "run", map[string]any{"error": convo.MissingResult})), content("user", text("never mind"))},
		},
		{
			name: "a compaction summary is user text, merged with what follows",
			events: cat(sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{Summary: summary}),
				sessionstore.UserText("next")),
			want: []*genai.Content{content("user",
				text("The conversation before this point was compacted; this is its summary.\n\n"+convo.RenderSummary(summary)), text("next"))},
		},
		{
			name:   "empty messages are left out, null arguments are none",
			events: cat(sessionstore.UserText(""), sessionstore.AssistantText(""), sessionstore.UserText("x"), reply("", call("a", "f", "null"))),
			want:   []*genai.Content{content("user", text("x")), content("model", fcall("a", "f", nil))},
		},
		{
			name:   "a derived id is not sent",
			events: cat(sessionstore.UserText("x"), reply("", call(derived, "f", `{}`)), result(derived, "ok", false)),
			want: []*genai.Content{content("user", text("x")), content("model", fcall("", "f", map[string]any{})),
				content("user", fresp("", "f", map[string]any{"output": "ok"}))},
		},
		{
			name:   "an orphan result is left out",
			events: cat(sessionstore.UserText("x"), result("zz", "lost", false)),
			want:   []*genai.Content{content("user", text("x"))},
		},
		{
			name: "nothing",
			want: []*genai.Content{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Contents(ids(tt.events...))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			// The SDK's JSON keeps every part (numbers decode as float64,
			// so the check is on the encoding).
			b, err := json.Marshal(got)
			require.NoError(t, err)
			var back []*genai.Content
			require.NoError(t, json.Unmarshal(b, &back))
			b2, err := json.Marshal(back)
			require.NoError(t, err)
			assert.JSONEq(t, string(b), string(b2))
		})
	}
}

func TestContentsArguments(t *testing.T) {
	// Numbers stay exact: 2^53+1 is not a float64.
	got, err := Contents(ids(reply("", call("a", "f", `{"n":9007199254740993,"x":1.5}`))...))
	require.NoError(t, err)
	b, err := json.Marshal(got[len(got)-1].Parts[0].FunctionCall.Args)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":9007199254740993,"x":1.5}`, string(b))
	assert.Contains(t, string(b), "9007199254740993")

	for _, args := range []string{`[1,2]`, `"s"`, `3`} {
		_, err := Contents(ids(reply("", call("bad", "f", args))...))
		assert.ErrorIs(t, err, ErrArguments, args)
		assert.ErrorContains(t, err, `"bad"`)
	}
}

func TestContentsErrors(t *testing.T) {
	unresolved := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindToolResult, Digest: "sha256:00", Size: 10}
	_, err := Contents([]sessionstore.Event{unresolved})
	assert.ErrorIs(t, err, convo.ErrUnresolved)

	bad := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindCompaction, Record: json.RawMessage(`{"summary":7}`)}
	_, err = Contents([]sessionstore.Event{bad})
	assert.ErrorContains(t, err, bad.ID.String())
}

func TestContentsWithThoughtSignature(t *testing.T) {
	sig := []byte("sig")
	evs := cat(sessionstore.UserText("x"), reply("t", call("a", "f", `{}`), call("b", "g", `{}`)), result("a", "A", false), result("b", "B", false),
		reply("", call("c", "h", `{}`)), result("c", "C", false), sessionstore.AssistantText("done"))
	got, err := ContentsWith(ids(evs...), &Options{ThoughtSignature: sig})
	require.NoError(t, err)
	var signed []string
	for _, c := range got {
		for _, p := range c.Parts {
			if p.ThoughtSignature != nil {
				require.NotNil(t, p.FunctionCall, "only function calls are signed")
				signed = append(signed, p.FunctionCall.Name)
			}
		}
	}
	assert.Equal(t, []string{"f", "h"}, signed, "the first call of each model content")

	plain, err := Contents(ids(evs...))
	require.NoError(t, err)
	for _, c := range plain {
		for _, p := range c.Parts {
			assert.Nil(t, p.ThoughtSignature)
		}
	}
}

// A response as the wire carries it, read by Reply, appended, results
// added and built again gives the candidate's content back.
func TestReplyRoundTrip(t *testing.T) {
	wire := `{"candidates":[{"content":{"role":"model","parts":[
		{"text":"Let me ","thought":true},{"text":"check.","thought":true},
		{"text":"Reading "},{"text":"both."},
		{"functionCall":{"name":"read","args":{"path":"a.go"}}},
		{"functionCall":{"id":"given-1","name":"read","args":{"path":"b.go","lines":[1,2]}}}]},
		"finishReason":"STOP"}],
		"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"thoughtsTokenCount":7,"cachedContentTokenCount":64},
		"modelVersion":"gemini-2.5-pro","responseId":"abc"}`
	var resp genai.GenerateContentResponse
	require.NoError(t, json.Unmarshal([]byte(wire), &resp))
	r, err := Reply(&resp)
	require.NoError(t, err)
	assert.Equal(t, "Reading both.", r.Text)
	assert.Equal(t, "Let me check.", r.Reasoning)
	assert.Equal(t, "gemini-2.5-pro", r.Model)
	assert.Equal(t, &sessionstore.Usage{InputTokens: 100, OutputTokens: 27, CacheReadTokens: 64}, r.Usage)
	require.Len(t, r.ToolCalls, 2)
	assert.Regexp(t, `^`+DerivedIDPrefix+`[0-9a-f]{16}$`, r.ToolCalls[0].CallID)
	assert.Equal(t, "given-1", r.ToolCalls[1].CallID)

	evs := cat(sessionstore.UserText("read"), r.Events(), result(r.ToolCalls[0].CallID, "A", false), result("given-1", "B", true))
	got, err := Contents(ids(evs...))
	require.NoError(t, err)
	require.Len(t, got, 3)

	// The model content is the candidate's, thoughts left out, text parts
	// joined, the derived id not sent.
	want := content("model", text("Reading both."),
		fcall("", "read", map[string]any{"path": "a.go"}),
		fcall("given-1", "read", map[string]any{"path": "b.go", "lines": []any{1.0, 2.0}}))
	gb, err := json.Marshal(got[1])
	require.NoError(t, err)
	wb, err := json.Marshal(want)
	require.NoError(t, err)
	assert.JSONEq(t, string(wb), string(gb))
	assert.Equal(t, content("user", fresp("", "read", map[string]any{"output": "A"}), fresp("given-1", "read", map[string]any{"error": "B"})), got[2])
}

func TestReply(t *testing.T) {
	tests := []struct {
		name string
		resp *genai.GenerateContentResponse
		want convo.Reply
		err  string
	}{
		{name: "nil", resp: nil, err: ErrNoCandidate.Error()},
		{name: "no candidate", resp: &genai.GenerateContentResponse{}, err: ErrNoCandidate.Error()},
		{
			name: "a blocked prompt says why",
			resp: &genai.GenerateContentResponse{PromptFeedback: &genai.GenerateContentResponsePromptFeedback{BlockReason: genai.BlockedReasonSafety}},
			err:  "prompt blocked: SAFETY",
		},
		{
			name: "a candidate without content",
			resp: &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonSafety}}, ModelVersion: "m"},
			want: convo.Reply{Model: "m"},
		},
		{
			name: "empty content, zero usage",
			resp: &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: content("model")}}, UsageMetadata: &genai.GenerateContentResponseUsageMetadata{}},
			want: convo.Reply{},
		},
		{
			name: "only the first candidate, nil parts skipped, no args is none",
			resp: &genai.GenerateContentResponse{Candidates: []*genai.Candidate{
				{Content: content("model", nil, text("a"), fcall("x", "f", nil))}, {Content: content("model", text("b"))}}},
			want: convo.Reply{Text: "a", ToolCalls: []sessionstore.ToolCall{{CallID: "x", Name: "f"}}},
		},
		{
			name: "arguments that do not encode",
			resp: &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: content("model", fcall("x", "f", map[string]any{"n": math.NaN()}))}}},
			err:  ErrArguments.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reply(tt.resp)
			if tt.err != "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := Reply(&genai.GenerateContentResponse{PromptFeedback: &genai.GenerateContentResponsePromptFeedback{BlockReason: genai.BlockedReasonOther}})
	assert.ErrorIs(t, err, ErrNoCandidate)
}

func TestReplyDerivedCallIDs(t *testing.T) {
	resp := func(id string) *genai.GenerateContentResponse {
		return &genai.GenerateContentResponse{ResponseID: id, Candidates: []*genai.Candidate{{Content: content("model",
			fcall("", "read", map[string]any{"p": 1}), fcall("", "read", map[string]any{"p": 1}), fcall("", "read", map[string]any{"p": 2}))}}}
	}
	a, err := Reply(resp("r1"))
	require.NoError(t, err)
	b, err := Reply(resp("r1"))
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same response gives the same ids")
	seen := map[string]bool{}
	for _, c := range a.ToolCalls {
		assert.False(t, seen[c.CallID], "ids are distinct: %s", c.CallID)
		seen[c.CallID] = true
	}
	// The id is the documented hash.
	h := sha256.Sum256([]byte("r1\x000\x00read\x00{\"p\":1}"))
	assert.Equal(t, DerivedIDPrefix+hex.EncodeToString(h[:8]), a.ToolCalls[0].CallID)

	other, err := Reply(resp("r2"))
	require.NoError(t, err)
	assert.NotEqual(t, a.ToolCalls[0].CallID, other.ToolCalls[0].CallID, "another response, other ids")
}

// FuzzContents feeds records of every kind, valid or not: Contents either
// fails or returns contents that alternate roles (but for user text after function responses), have parts, and whose
// every function response answers a call of the model content before it.
func FuzzContents(f *testing.F) {
	f.Add([]byte(`{"content":"hi"}`), []byte(`{"content":"","tool_calls":[{"call_id":"a","name":"f"}]}`), []byte(`{"call_id":"a","output":"x"}`), uint8(0))
	f.Add([]byte(`{"call_id":"b","name":"g","arguments":{"x":1}}`), []byte(`{"summary":{"text":"s"}}`), []byte(`{"call_id":"b","output":"y","is_error":true}`), uint8(7))
	f.Add([]byte(`[1]`), []byte(`null`), []byte(`{"call_id":"genai-00","name":"h","arguments":[1]}`), uint8(3))
	kinds := []struct {
		kind sessionstore.Kind
		role sessionstore.Role
	}{
		{sessionstore.KindMessage, sessionstore.RoleUser}, {sessionstore.KindMessage, sessionstore.RoleAssistant},
		{sessionstore.KindToolCall, sessionstore.RoleAssistant}, {sessionstore.KindToolResult, sessionstore.RoleTool},
		{sessionstore.KindCompaction, sessionstore.RoleNone}, {sessionstore.KindBranchSummary, sessionstore.RoleNone},
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte, sel uint8) {
		var evs []sessionstore.Event
		for i, rec := range [][]byte{a, b, c, a, c} {
			k := kinds[(int(sel)+i*int(sel>>4+1))%len(kinds)]
			if !json.Valid(rec) {
				rec = []byte(fmt.Sprintf("%q", rec))
			}
			evs = append(evs, sessionstore.Event{Kind: k.kind, Role: k.role, Record: json.RawMessage(rec)})
		}
		got, err := Contents(ids(evs...))
		if err != nil {
			return
		}
		var calls map[string]int // name -> calls of the last model content not yet answered
		for i, c := range got {
			require.NotEmpty(t, c.Parts)
			if i > 0 && got[i-1].Role == c.Role {
				require.NotEqual(t, isResponse(got[i-1].Parts[0]), isResponse(c.Parts[0]), "same-role contents are merged unless one holds function responses")
			}
			switch c.Role {
			case genai.RoleModel:
				calls = map[string]int{}
				for _, p := range c.Parts {
					if p.FunctionCall != nil {
						calls[p.FunctionCall.ID+"/"+p.FunctionCall.Name]++
					}
				}
			case genai.RoleUser:
				for _, p := range c.Parts {
					if fr := p.FunctionResponse; fr != nil {
						key := fr.ID + "/" + fr.Name
						require.Positive(t, calls[key], "response %s without its call", key)
						calls[key]--
						require.Len(t, fr.Response, 1)
					}
				}
				calls = nil
			default:
				t.Fatalf("role %q", c.Role)
			}
		}
	})
}

func BenchmarkContents(b *testing.B) {
	var evs []sessionstore.Event
	for i := range 100 {
		id := fmt.Sprintf("c%d", i)
		evs = append(evs, sessionstore.UserText("step"))
		evs = append(evs, reply("working on it", call(id, "read", `{"path":"a.go"}`))...)
		evs = append(evs, result(id, "package main\n\nfunc main() {}\n", false))
	}
	evs = ids(evs...)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		got, err := Contents(evs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(got)
	}
	b.ReportMetric(float64(len(evs)), "events/op")
	b.ReportMetric(float64(n), "contents/op")
}

// FuzzReplyWire decodes responses as the wire carries them: whatever
// Reply accepts becomes events that Contents sends back, with every
// function call of the reply in the model content.
func FuzzReplyWire(f *testing.F) {
	f.Add([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"a"},{"functionCall":{"name":"f","args":{"x":[1,{"y":null}]}}}]}}],"responseId":"r"}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"functionCall":{"id":"i","name":"g"}},{"functionCall":{"name":"g","args":{}}}]}}],"usageMetadata":{"promptTokenCount":3}}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"id":"i","name":"a"}},{"functionCall":{"id":"i","name":"b"}}]}}]}`))
	// The SDK's own decoder (v1.77.0) panics on a top-level null: such
	// input is not a response Reply could be given.
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, wire []byte) {
		var resp genai.GenerateContentResponse
		if sdkDecode(wire, &resp) != nil {
			return
		}
		r, err := Reply(&resp)
		if err != nil {
			return
		}
		evs := append([]sessionstore.Event{sessionstore.UserText("go")}, r.Events()...)
		got, err := Contents(ids(evs...))
		require.NoError(t, err)
		var calls []string
		for _, c := range got {
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					require.Equal(t, genai.RoleModel, c.Role)
					calls = append(calls, p.FunctionCall.Name)
				}
			}
		}
		var want []string
		for _, c := range r.ToolCalls {
			want = append(want, c.Name)
		}
		assert.Equal(t, want, calls)
	})
}

// sdkDecode is json.Unmarshal, with a panic of the SDK's UnmarshalJSON
// as an error.
func sdkDecode(b []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the SDK's decoder panicked: %v", r)
		}
	}()
	return json.Unmarshal(b, v)
}
