package anthropicadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/sessionstore/sessionstore"
	anthropicadapter "github.com/sessionstore/sessionstore/adapters/anthropic"
)

// fakeMessages answers POST /v1/messages as the API does: with thinking
// and a tool_use while the request has no tool_result, then with a final
// text. It refuses (400) a request that breaks the API's rules the
// adapter keeps: roles that do not alternate, a tool_result that does not
// answer a tool_use of the message before, a tool_use not answered in the
// next message, or (thinking being on) an assistant turn with tool_use
// that does not start with the thinking block the server signed for it
// (signature "sig-1"): a turn sent without its thinking, or with a
// signature the server never gave, is refused, as the API refuses it.
func fakeMessages() http.Handler {
	type block struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		ToolUseID string `json:"tool_use_id"`
		Signature string `json:"signature"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string  `json:"role"`
				Content []block `json:"content"`
			} `json:"messages"`
		}
		fail := func(msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, msg)
		}
		if r.URL.Path != "/v1/messages" || json.NewDecoder(r.Body).Decode(&req) != nil {
			fail("bad request")
			return
		}
		uses, answered := map[string]bool{}, 0
		for i, m := range req.Messages {
			if i > 0 && req.Messages[i-1].Role == m.Role {
				fail("roles must alternate")
				return
			}
			next, other, results := map[string]bool{}, false, map[string]bool{}
			for _, b := range m.Content {
				switch b.Type {
				case "tool_use":
					if m.Content[0].Type != "thinking" {
						fail("a final assistant message must start with a thinking block")
						return
					}
					if m.Content[0].Signature != "sig-1" {
						fail("Invalid `signature` in `thinking` block")
						return
					}
					next[b.ID] = true
				case "tool_result":
					if !uses[b.ToolUseID] || other {
						fail("tool_result blocks must come first and answer a tool_use of the message before")
						return
					}
					results[b.ToolUseID] = true
					answered++
				default:
					other = true
				}
			}
			for id := range uses {
				if !results[id] {
					fail("tool_use ids were found without tool_result blocks immediately after")
					return
				}
			}
			uses = next
		}
		if len(uses) > 0 {
			fail("tool_use ids were found without tool_result blocks immediately after")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if answered == 0 {
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
			  "content":[
			    {"type":"thinking","thinking":"I should read go.mod.","signature":"sig-1"},
			    {"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"go.mod"}}],
			  "stop_reason":"tool_use","stop_sequence":null,
			  "usage":{"input_tokens":50,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":40}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test",
		  "content":[{"type":"text","text":"The module is example (%d result seen)."}],
		  "stop_reason":"end_turn","stop_sequence":null,
		  "usage":{"input_tokens":30,"output_tokens":12,"cache_read_input_tokens":40,"cache_creation_input_tokens":0}}`, answered)
	})
}

func readFile(input json.RawMessage) string {
	var a struct{ Path string }
	if err := json.Unmarshal(input, &a); err != nil {
		return "bad input: " + err.Error()
	}
	return "module example // " + a.Path
}

// An agent loop over the Messages API, run against a local server that
// speaks its wire format: Load, request, append the reply, run the tool,
// append its result, and again until the model answers. The reply's
// signed thinking is sent back with its tool_use, as the API requires
// with thinking on.
func ExampleMessages() {
	srv := httptest.NewServer(fakeMessages())
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "anthropicadapter-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.Append(ctx, meta.ID, sessionstore.UserText("What is the module's name?")); err != nil {
		log.Fatal(err)
	}

	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "read_file",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}},
	}}}
	for {
		evs, err := st.Load(ctx, meta.ID)
		if err != nil {
			log.Fatal(err)
		}
		msgs, err := anthropicadapter.Messages(evs)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     "claude-test",
			MaxTokens: 1024,
			System:    []anthropic.TextBlockParam{{Text: "You read files."}},
			Messages:  msgs,
			Tools:     tools,
			Thinking:  anthropic.ThinkingConfigParamOfEnabled(512),
		})
		if err != nil {
			log.Fatal(err)
		}
		evs, err = anthropicadapter.Events(resp)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.AppendBatch(ctx, meta.ID, evs...); err != nil {
			log.Fatal(err)
		}
		reply, err := anthropicadapter.Reply(resp)
		if err != nil {
			log.Fatal(err)
		}
		if reply.Reasoning != "" {
			fmt.Println("thinking:", reply.Reasoning)
		}
		fmt.Printf("usage: input %d, cache read %d, cache write %d\n", reply.Usage.InputTokens, reply.Usage.CacheReadTokens, reply.Usage.CacheWriteTokens)
		if len(reply.ToolCalls) == 0 {
			fmt.Println("answer:", reply.Text)
			break
		}
		for _, c := range reply.ToolCalls {
			out := readFile(c.Arguments)
			fmt.Printf("tool %s(%s) -> %q\n", c.Name, c.Arguments, out)
			if _, err := st.Append(ctx, meta.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: c.CallID, Output: out})); err != nil {
				log.Fatal(err)
			}
		}
	}
	// Output:
	// thinking: I should read go.mod.
	// usage: input 50, cache read 0, cache write 40
	// tool read_file({"path":"go.mod"}) -> "module example // go.mod"
	// usage: input 30, cache read 40, cache write 0
	// answer: The module is example (1 result seen).
}

// A response's reply as the events to append: the assistant message keeps
// the signed thinking block as its provider state, the block's JSON as the
// API sent it (base64 in the record).
func ExampleEvents() {
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(`{"id":"m","type":"message","role":"assistant","model":"claude-test",
	  "content":[{"type":"thinking","thinking":"List it.","signature":"sig"},{"type":"tool_use","id":"toolu_1","name":"ls","input":{}}],
	  "usage":{"input_tokens":10,"output_tokens":3}}`), &msg); err != nil {
		log.Fatal(err)
	}
	evs, err := anthropicadapter.Events(&msg)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Kind, ev.Role)
	}
	m, err := evs[0].Message()
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range m.ProviderState {
		fmt.Printf("%s %s %s\n", st.Provider, st.Type, st.Data)
	}
	// Output:
	// message assistant
	// tool_call assistant
	// anthropic thinking {"type":"thinking","thinking":"List it.","signature":"sig"}
}

// Arguments that are not a JSON object become one.
func ExampleInput() {
	fmt.Println(string(anthropicadapter.Input(nil)))
	fmt.Println(string(anthropicadapter.Input(json.RawMessage(`{"path":"a.go"}`))))
	fmt.Println(string(anthropicadapter.Input(json.RawMessage(`"ls -l"`))))
	// Output:
	// {}
	// {"path":"a.go"}
	// {"arguments":"ls -l"}
}
