package openaiadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/sessionstore/sessionstore"
	openaiadapter "github.com/sessionstore/sessionstore/adapters/openai"
)

// fakeChat answers POST /chat/completions as the API does: with a tool
// call while the request has no tool result, then with a final text. It
// refuses (400) a request whose tool message does not answer a call of
// the assistant message before it, or whose assistant message's calls are
// not all answered by the tool messages right after it.
func fakeChat() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if r.URL.Path != "/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		open, answered := map[string]bool{}, 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				if !open[m.ToolCallID] {
					http.Error(w, `{"error":{"message":"tool message without its call"}}`, http.StatusBadRequest)
					return
				}
				delete(open, m.ToolCallID)
				answered++
				continue
			}
			if len(open) > 0 {
				http.Error(w, `{"error":{"message":"tool_calls not followed by tool messages for each tool_call_id"}}`, http.StatusBadRequest)
				return
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
		if len(open) > 0 {
			http.Error(w, `{"error":{"message":"tool_calls not followed by tool messages for each tool_call_id"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if answered == 0 {
			fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
			  "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
			    "tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"go.mod\"}"}}]}}],
			  "usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-2","object":"chat.completion","created":2,"model":"gpt-test",
		  "choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"The module is example (%d result seen)."}}],
		  "usage":{"prompt_tokens":80,"completion_tokens":12,"total_tokens":92,"prompt_tokens_details":{"cached_tokens":48}}}`, answered)
	})
}

// readFile is the example's tool.
func readFile(args string) string {
	var a struct{ Path string }
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return "bad arguments: " + err.Error()
	}
	return "module example // " + a.Path
}

// newSession opens a store in a temporary directory with one session
// holding the user's question.
func newSession(ctx context.Context, question string) (*sessionstore.Store, sessionstore.Meta, func()) {
	dir, err := os.MkdirTemp("", "openaiadapter-example")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	m, err := st.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.Append(ctx, m.ID, sessionstore.UserText(question)); err != nil {
		log.Fatal(err)
	}
	return st, m, func() { st.Close(); os.RemoveAll(dir) }
}

// An agent loop over Chat Completions, run against a local server that
// speaks the API's wire format: Load, request, append the reply, run the
// tool, append its result, and again until the model answers.
func ExampleChatMessages() {
	srv := httptest.NewServer(fakeChat())
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	ctx := context.Background()
	st, meta, done := newSession(ctx, "What is the module's name?")
	defer done()

	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:       "read_file",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
	})}
	for {
		evs, err := st.Load(ctx, meta.ID)
		if err != nil {
			log.Fatal(err)
		}
		msgs, err := openaiadapter.ChatMessages(evs)
		if err != nil {
			log.Fatal(err)
		}
		completion, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You read files.")}, msgs...),
			Tools:    tools,
		})
		if err != nil {
			log.Fatal(err)
		}
		reply, err := openaiadapter.ChatReply(completion)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.AppendBatch(ctx, meta.ID, reply.Events()...); err != nil {
			log.Fatal(err)
		}
		if len(reply.ToolCalls) == 0 {
			fmt.Printf("answer: %s (cache read %d of %d input tokens)\n", reply.Text,
				reply.Usage.CacheReadTokens, reply.Usage.CacheReadTokens+reply.Usage.InputTokens)
			break
		}
		for _, c := range reply.ToolCalls {
			out := readFile(openaiadapter.ArgumentsText(c.Arguments))
			fmt.Printf("tool %s(%s) -> %q\n", c.Name, c.Arguments, out)
			if _, err := st.Append(ctx, meta.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: c.CallID, Output: out})); err != nil {
				log.Fatal(err)
			}
		}
	}
	evs, err := st.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Kind, ev.Role)
	}
	// Output:
	// tool read_file({"path":"go.mod"}) -> "module example // go.mod"
	// answer: The module is example (1 result seen). (cache read 48 of 80 input tokens)
	// message user
	// message assistant
	// tool_call assistant
	// tool_result tool
	// message assistant
}

// fakeResponses answers POST /responses as a reasoning model does: while
// the input has no function_call_output, with a reasoning item (rs_1, its
// encrypted_content "enc-1" when the request includes
// "reasoning.encrypted_content") and a function call (fc_1, call_1) it
// made after that reasoning; then with a final message. It refuses (400),
// as the API does:
//   - an output whose function_call is not before it, and a function_call
//     without its output;
//   - call_1 without the reasoning item it followed: rs_1 (or its
//     encrypted content) before it in its turn;
//   - a reasoning item with an id not followed by an item with an id (the
//     API pairs them by id), and one whose function_call names another
//     reasoning item;
//   - with store false, a reasoning item without the encrypted content
//     (the API keeps no items to find it by id), or with encrypted content
//     the server did not give.
func fakeResponses() http.Handler {
	type item struct {
		Type             string  `json:"type"`
		ID               string  `json:"id"`
		CallID           string  `json:"call_id"`
		EncryptedContent *string `json:"encrypted_content"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input   []item   `json:"input"`
			Store   *bool    `json:"store"`
			Include []string `json:"include"`
		}
		fail := func(msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":"input","code":null}}`, msg)
		}
		if r.URL.Path != "/responses" || json.NewDecoder(r.Body).Decode(&req) != nil {
			fail("bad request")
			return
		}
		stateless := req.Store != nil && !*req.Store
		open, answered := map[string]bool{}, 0
		reasoned := false // the reasoning of call_1 came in its turn
		for i, it := range req.Input {
			switch it.Type {
			case "reasoning":
				enc := it.EncryptedContent != nil && *it.EncryptedContent != ""
				switch {
				case enc && *it.EncryptedContent != "enc-1":
					fail("The encrypted content for item " + it.ID + " could not be verified.")
					return
				case !enc && (stateless || it.ID == ""):
					fail("Item with id '" + it.ID + "' not found. Items are not persisted when `store` is set to false.")
					return
				case !enc && it.ID != "rs_1":
					fail("Item with id '" + it.ID + "' not found.")
					return
				case it.ID != "" && (i+1 == len(req.Input) || req.Input[i+1].ID == ""):
					fail("Item '" + it.ID + "' of type 'reasoning' was provided without its required following item.")
					return
				}
				reasoned = true
				continue
			case "function_call":
				if it.CallID == "call_1" && !reasoned {
					fail("Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'.")
					return
				}
				if it.ID != "" && (i == 0 || req.Input[i-1].Type != "reasoning" || it.ID != "fc_1" || req.Input[i-1].ID != "rs_1") {
					fail("Item '" + it.ID + "' of type 'function_call' was provided without its required 'reasoning' item.")
					return
				}
				open[it.CallID] = true
				continue
			case "function_call_output":
				if !open[it.CallID] {
					fail("No tool call found for function call output with call_id " + it.CallID + ".")
					return
				}
				delete(open, it.CallID)
				answered++
			}
			reasoned = false
		}
		if len(open) > 0 {
			fail("No tool output found for function call.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if answered == 0 {
			enc := ""
			if slices.Contains(req.Include, "reasoning.encrypted_content") {
				enc = `,"encrypted_content":"enc-1"`
			}
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-test",
			  "output":[
			    {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"I should read go.mod."}]%s},
			    {"type":"function_call","id":"fc_1","call_id":"call_1","name":"read_file","arguments":"{\"path\":\"go.mod\"}","status":"completed"}],
			  "usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":70}}`, enc)
			return
		}
		fmt.Fprintf(w, `{"id":"resp_2","object":"response","created_at":2,"status":"completed","model":"gpt-test",
		  "output":[{"type":"message","id":"msg_2","role":"assistant","status":"completed",
		    "content":[{"type":"output_text","text":"The module is example (%d result seen).","annotations":[]}]}],
		  "usage":{"input_tokens":90,"input_tokens_details":{"cached_tokens":64},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":102}}`, answered)
	})
}

// The same loop over the Responses API, with a reasoning model used
// statelessly (Store false, the reasoning's encrypted content asked for):
// the reply's reasoning item is stored with its call and sent back before
// it, which the server requires.
func ExampleResponsesInput() {
	srv := httptest.NewServer(fakeResponses())
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	ctx := context.Background()
	st, meta, done := newSession(ctx, "What is the module's name?")
	defer done()

	for {
		evs, err := st.Load(ctx, meta.ID)
		if err != nil {
			log.Fatal(err)
		}
		input, err := openaiadapter.ResponsesInput(evs)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model:        "gpt-test",
			Store:        openai.Bool(false),
			Include:      []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
			Instructions: openai.String("You read files."),
			Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
				Name:       "read_file",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
			}}},
		})
		if err != nil {
			log.Fatal(err)
		}
		evs, err = openaiadapter.ResponseEvents(resp)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.AppendBatch(ctx, meta.ID, evs...); err != nil {
			log.Fatal(err)
		}
		reply, err := evs[0].Message()
		if err != nil {
			log.Fatal(err)
		}
		if reply.Reasoning != "" {
			fmt.Println("reasoning:", reply.Reasoning)
		}
		if len(reply.ToolCalls) == 0 {
			fmt.Printf("answer: %s (cache read %d tokens)\n", reply.Content, reply.Usage.CacheReadTokens)
			break
		}
		for _, c := range reply.ToolCalls {
			out := readFile(openaiadapter.ArgumentsText(c.Arguments))
			fmt.Printf("tool %s -> %q\n", c.Name, out)
			if _, err := st.Append(ctx, meta.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: c.CallID, Output: out})); err != nil {
				log.Fatal(err)
			}
		}
	}
	// Output:
	// reasoning: I should read go.mod.
	// tool read_file -> "module example // go.mod"
	// answer: The module is example (1 result seen). (cache read 64 tokens)
}

// A chat completion's reply as the events to append.
func ExampleChatEvents() {
	var completion openai.ChatCompletion
	if err := json.Unmarshal([]byte(`{"id":"c","object":"chat.completion","model":"gpt-test","choices":[{"index":0,
	  "message":{"role":"assistant","content":"Looking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]}}],
	  "usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`), &completion); err != nil {
		log.Fatal(err)
	}
	evs, err := openaiadapter.ChatEvents(&completion)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Kind, ev.Role, string(ev.Record))
	}
	// Output:
	// message assistant {"content":"Looking.","model":"gpt-test","usage":{"input_tokens":10,"output_tokens":3},"tool_calls":[{"call_id":"call_1","name":"ls","arguments":{}}]}
	// tool_call assistant {"call_id":"call_1","name":"ls","arguments":{}}
}

// Arguments a model wrote that are not valid JSON are stored as a JSON
// string and sent back as written.
func ExampleArgumentsJSON() {
	stored := openaiadapter.ArgumentsJSON(`{"path": "a.go"`)
	fmt.Println(string(stored))
	fmt.Println(openaiadapter.ArgumentsText(stored))
	// Output:
	// "{\"path\": \"a.go\""
	// {"path": "a.go"
}
