package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/adapters/eino"
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

// One turn of an agent loop with eino-ext's OpenAI ChatModel against a
// local Chat Completions server: Load, request, append the reply, run the
// tool, append its result, Load, request again, append the answer.
func Example() {
	ctx := context.Background()
	var seen []string
	srv := chatServer(&seen)
	defer srv.Close()
	cm, err := openai.NewChatModel(ctx, &openai.ChatModelConfig{BaseURL: srv.URL, APIKey: "test", Model: "gpt-4o-mini"})
	if err != nil {
		log.Fatal(err)
	}
	var llm model.ToolCallingChatModel = cm
	if llm, err = llm.WithTools([]*schema.ToolInfo{{Name: "read_file", Desc: "Read a file.", ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
		"path": {Type: schema.String, Required: true},
	})}}); err != nil {
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "eino-example")
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
	system := schema.SystemMessage("You are a coding agent.")

	// ask sends the session's context and appends the reply; it returns
	// the calls to run.
	ask := func() []sessionstore.ToolCall {
		evs, err := st.Load(ctx, sess.ID)
		if err != nil {
			log.Fatal(err)
		}
		msgs, err := eino.Messages(evs)
		if err != nil {
			log.Fatal(err)
		}
		out, err := llm.Generate(ctx, append([]*schema.Message{system}, msgs...))
		if err != nil {
			log.Fatal(err)
		}
		reply, err := eino.Reply(out)
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

// Messages turns a session's events into Eino's request messages.
func ExampleMessages() {
	evs := []sessionstore.Event{sessionstore.UserText("List the files."),
		sessionstore.AssistantMessage(sessionstore.Message{Reasoning: "ls will do", ToolCalls: []sessionstore.ToolCall{{CallID: "c1", Name: "ls"}}}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "permission denied", IsError: true})}
	msgs, err := eino.Messages(evs)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		switch m.Role {
		case schema.Assistant:
			fmt.Printf("%s: (%s) call %s %s(%s)\n", m.Role, m.ReasoningContent, m.ToolCalls[0].ID, m.ToolCalls[0].Function.Name, m.ToolCalls[0].Function.Arguments)
		case schema.Tool:
			fmt.Printf("%s: %s %s -> %s\n", m.Role, m.ToolCallID, m.ToolName, m.Content)
		default:
			fmt.Printf("%s: %s\n", m.Role, m.Content)
		}
	}
	// Output:
	// user: List the files.
	// assistant: (ls will do) call c1 ls({})
	// tool: c1 ls -> error: permission denied
}

// Reply reads what Generate returned; its Events are what to append.
func ExampleReply() {
	out := &schema.Message{
		Role:         schema.Assistant,
		Content:      "Reading it.",
		ToolCalls:    []schema.ToolCall{{ID: "call_9", Type: "function", Function: schema.FunctionCall{Name: "read_file", Arguments: `{"path":"a.go"}`}}},
		ResponseMeta: &schema.ResponseMeta{Usage: &schema.TokenUsage{PromptTokens: 40, CompletionTokens: 8}},
	}
	reply, err := eino.Reply(out)
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
