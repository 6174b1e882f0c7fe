package langchaingo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/adapters/langchaingo"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"
)

// chatServer plays a Chat Completions endpoint: asked without a tool
// result, it calls read_file; asked with one, it answers with text. It
// writes to seen what each request carried: the tool message and the
// call it answers.
func chatServer(seen *[]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    any    `json:"content"`
				ToolCalls  []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/chat/completions" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		msgs := req.Messages
		last := msgs[len(msgs)-1]
		var answer string
		if last.Role == "tool" {
			prev := msgs[len(msgs)-2]
			paired := prev.Role == "assistant" && len(prev.ToolCalls) == 1 && prev.ToolCalls[0].ID == last.ToolCallID
			*seen = append(*seen, fmt.Sprintf("request %d: %d messages, tool result %s %v, paired with its call: %v",
				len(*seen)+1, len(msgs), last.ToolCallID, last.Content, paired))
			answer = `{"role":"assistant","content":"go.mod declares module example."}`
		} else {
			*seen = append(*seen, fmt.Sprintf("request %d: %d messages, last from %s", len(*seen)+1, len(msgs), last.Role))
			answer = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"go.mod\"}"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, answer)
	}))
}

// One turn of an agent loop with LangChainGo's OpenAI model against a
// local Chat Completions server: Load, request, append the reply, run the
// tool, append its result, Load, request again, append the answer.
func Example() {
	ctx := context.Background()
	var seen []string
	srv := chatServer(&seen)
	defer srv.Close()
	llm, err := openai.New(openai.WithBaseURL(srv.URL), openai.WithToken("test"), openai.WithModel("gpt-4o-mini"))
	if err != nil {
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "langchaingo-example")
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
	system := llms.TextParts(llms.ChatMessageTypeSystem, "You are a coding agent.")

	// ask sends the session's context and appends the reply; it returns
	// the calls to run.
	ask := func() []sessionstore.ToolCall {
		evs, err := st.Load(ctx, sess.ID)
		if err != nil {
			log.Fatal(err)
		}
		msgs, err := langchaingo.Messages(evs)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := llm.GenerateContent(ctx, append([]llms.MessageContent{system}, msgs...))
		if err != nil {
			log.Fatal(err)
		}
		reply, err := langchaingo.Reply(resp)
		if err != nil {
			log.Fatal(err)
		}
		reply.Model = "gpt-4o-mini"
		if _, err := st.AppendBatch(ctx, sess.ID, reply.Events()...); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("reply: %q, %d calls, %d input tokens\n", reply.Text, len(reply.ToolCalls), reply.Usage.InputTokens)
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
	// reply: "", 1 calls, 12 input tokens
	// reply: "go.mod declares module example.", 0 calls, 12 input tokens
	// request 1: 2 messages, last from user
	// request 2: 4 messages, tool result call_1 module example, paired with its call: true
}

// Messages turns a session's events into LangChainGo's request messages.
func ExampleMessages() {
	evs := append([]sessionstore.Event{sessionstore.UserText("List the files.")},
		sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{{CallID: "c1", Name: "ls"}}}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "permission denied", IsError: true}))
	msgs, err := langchaingo.Messages(evs)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				fmt.Printf("%s: %s\n", m.Role, p.Text)
			case llms.ToolCall:
				fmt.Printf("%s: call %s %s(%s)\n", m.Role, p.ID, p.FunctionCall.Name, p.FunctionCall.Arguments)
			case llms.ToolCallResponse:
				fmt.Printf("%s: %s %s -> %s\n", m.Role, p.ToolCallID, p.Name, p.Content)
			}
		}
	}
	// Output:
	// human: List the files.
	// ai: call c1 ls({})
	// tool: c1 ls -> error: permission denied
}

// Reply reads a response's first choice; its Events are what to append.
func ExampleReply() {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content:        "Reading it.",
		ToolCalls:      []llms.ToolCall{{ID: "call_9", Type: "function", FunctionCall: &llms.FunctionCall{Name: "read_file", Arguments: `{"path":"a.go"}`}}},
		GenerationInfo: map[string]any{"PromptTokens": 40, "CompletionTokens": 8},
	}}}
	reply, err := langchaingo.Reply(resp)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range reply.Events() {
		fmt.Println(ev.Kind, string(ev.Record))
	}
	// Output:
	// message {"content":"Reading it.","usage":{"input_tokens":40,"output_tokens":8},"tool_calls":[{"call_id":"call_9","name":"read_file","arguments":{"path":"a.go"}}]}
	// tool_call {"call_id":"call_9","name":"read_file","arguments":{"path":"a.go"}}
}

// ReplyAll joins the choices of a provider that returns one per content
// block, as LangChainGo's anthropic provider does.
func ExampleReplyAll() {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{
		{Content: "Let me look."},
		{ToolCalls: []llms.ToolCall{{ID: "toolu_1", FunctionCall: &llms.FunctionCall{Name: "ls", Arguments: `{}`}}}},
	}}
	reply, err := langchaingo.ReplyAll(resp)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %s %s\n", reply.Text, reply.ToolCalls[0].CallID, reply.ToolCalls[0].Name)
	// Output:
	// "Let me look." toolu_1 ls
}
