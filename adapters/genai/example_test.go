package genai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/sessionstore/sessionstore"
	adapter "github.com/sessionstore/sessionstore/adapters/genai"
	"google.golang.org/genai"
)

// geminiServer plays a Gemini 3 model's generateContent: asked without a
// function response, it calls read_file (with no call id, as the Gemini
// API may), the call signed with the thought signature "sig-1"; asked
// with one, it answers with text. It writes to seen what each request
// carried: the function response and the call it answers. As the API
// does, it refuses (400) a model content whose first function call comes
// back without its signature (or with one it did not give, other than
// the documented "skip_thought_signature_validator").
func geminiServer(seen *[]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Contents []genai.Content `json:"contents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasSuffix(r.URL.Path, "/models/gemini-3-flash:generateContent") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		cs := req.Contents
		for i, c := range cs {
			for _, p := range c.Parts {
				if p.FunctionCall == nil {
					continue
				}
				if sig := string(p.ThoughtSignature); sig != "sig-1" && sig != "skip_thought_signature_validator" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprintf(w, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call %s , position %d.","status":"INVALID_ARGUMENT"}}`, p.FunctionCall.Name, i+1)
					return
				}
				break // the first function call of a content is signed
			}
		}
		last := cs[len(cs)-1]
		var parts string
		if fr := last.Parts[0].FunctionResponse; fr != nil {
			prev := cs[len(cs)-2]
			fc := prev.Parts[0].FunctionCall
			paired := prev.Role == genai.RoleModel && fc != nil && fc.Name == fr.Name && fc.ID == fr.ID
			*seen = append(*seen, fmt.Sprintf("request %d: %d contents, %s response %v, paired with its call: %v",
				len(*seen)+1, len(cs), fr.Name, fr.Response, paired))
			parts = `[{"text":"go.mod declares "},{"text":"module example."}]`
		} else {
			*seen = append(*seen, fmt.Sprintf("request %d: %d contents, last from %s: %q", len(*seen)+1, len(cs), last.Role, last.Parts[0].Text))
			parts = `[{"text":"I should read it.","thought":true},{"functionCall":{"name":"read_file","args":{"path":"go.mod"}},"thoughtSignature":"c2lnLTE="}]`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"candidates":[{"content":{"role":"model","parts":%s},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"thoughtsTokenCount":3},"modelVersion":"gemini-3-flash","responseId":"resp-%d"}`, parts, len(*seen))
	}))
}

// One turn of an agent loop with the Gen AI SDK's client against a local
// server speaking the Gemini API: Load, request, append the reply, run
// the tool, append its result, Load, request again, append the answer.
// The call's thought signature is stored with it and sent back, which the
// server, like Gemini 3, requires.
func Example() {
	ctx := context.Background()
	var seen []string
	srv := geminiServer(&seen)
	defer srv.Close()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	if err != nil {
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "genai-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	sess, err := st.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.Append(ctx, sess.ID, sessionstore.UserText("What is in go.mod?")); err != nil {
		log.Fatal(err)
	}
	config := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("You are a coding agent.", genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name: "read_file", Description: "Read a file.",
			Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"path": {Type: genai.TypeString}}},
		}}}},
	}

	// ask sends the session's context and appends the reply; it returns
	// the calls to run.
	ask := func() []sessionstore.ToolCall {
		evs, err := st.Load(ctx, sess.ID)
		if err != nil {
			log.Fatal(err)
		}
		contents, err := adapter.Contents(evs)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := client.Models.GenerateContent(ctx, "gemini-3-flash", contents, config)
		if err != nil {
			log.Fatal(err)
		}
		reply, err := adapter.Reply(resp)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.AppendBatch(ctx, sess.ID, reply.Events()...); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("reply from %s: %q (thought %q), %d calls, %d output tokens\n",
			reply.Model, reply.Text, reply.Reasoning, len(reply.ToolCalls), reply.Usage.OutputTokens)
		return reply.ToolCalls
	}

	for _, call := range ask() {
		// Run the tool, then record its result.
		res := sessionstore.ToolResult{CallID: call.CallID, Output: "module example"}
		if _, err := st.Append(ctx, sess.ID, sessionstore.ToolResultEvent(res)); err != nil {
			log.Fatal(err)
		}
	}
	ask()
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// reply from gemini-3-flash: "" (thought "I should read it."), 1 calls, 8 output tokens
	// reply from gemini-3-flash: "go.mod declares module example." (thought ""), 0 calls, 8 output tokens
	// request 1: 1 contents, last from user: "What is in go.mod?"
	// request 2: 3 contents, read_file response map[output:module example], paired with its call: true
}

// Contents turns a session's events into the SDK's request contents: the
// results of parallel calls share one user content.
func ExampleContents() {
	evs := []sessionstore.Event{sessionstore.UserText("Compare a.go and b.go."),
		sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{
			{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)},
			{CallID: "c2", Name: "read_file", Arguments: json.RawMessage(`{"path":"b.go"}`)},
		}}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "package a"}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c2", Output: "no such file", IsError: true}),
	}
	contents, err := adapter.Contents(evs)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				fmt.Printf("%s: call %s %s %v\n", c.Role, p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.Args)
			case p.FunctionResponse != nil:
				fmt.Printf("%s: response %s %s %v\n", c.Role, p.FunctionResponse.ID, p.FunctionResponse.Name, p.FunctionResponse.Response)
			default:
				fmt.Printf("%s: %s\n", c.Role, p.Text)
			}
		}
	}
	// Output:
	// user: Compare a.go and b.go.
	// model: call c1 read_file map[path:a.go]
	// model: call c2 read_file map[path:b.go]
	// user: response c1 read_file map[output:package a]
	// user: response c2 read_file map[error:no such file]
}

// ContentsWith puts a thought signature on each model turn's first
// function call that has none stored (a history written without them),
// for models that refuse unsigned calls.
func ExampleContentsWith() {
	evs := []sessionstore.Event{sessionstore.UserText("List the files."),
		sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{{CallID: "c1", Name: "ls"}, {CallID: "c2", Name: "pwd"}}}),
	}
	contents, err := adapter.ContentsWith(evs, &adapter.Options{ThoughtSignature: []byte("skip_thought_signature_validator")})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range contents[1].Parts {
		fmt.Printf("%s signed: %q\n", p.FunctionCall.Name, p.ThoughtSignature)
	}
	// Output:
	// ls signed: "skip_thought_signature_validator"
	// pwd signed: ""
}

// Reply reads a response's first candidate; its Events are what to
// append. A call without an id gets a derived one.
func ExampleReply() {
	var resp genai.GenerateContentResponse
	if err := json.Unmarshal([]byte(`{"candidates":[{"content":{"role":"model","parts":[
		{"text":"Reading it."},{"functionCall":{"name":"read_file","args":{"path":"a.go"}}}]}}],
		"usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":8},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`), &resp); err != nil {
		log.Fatal(err)
	}
	reply, err := adapter.Reply(&resp)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range reply.Events() {
		fmt.Println(ev.Kind, string(ev.Record))
	}
	// Output:
	// message {"content":"Reading it.","model":"gemini-2.5-pro","usage":{"input_tokens":40,"output_tokens":8},"tool_calls":[{"call_id":"genai-5468b47eff5217e9","name":"read_file","arguments":{"path":"a.go"}}]}
	// tool_call {"call_id":"genai-5468b47eff5217e9","name":"read_file","arguments":{"path":"a.go"}}
}
