package langchaingo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms/openai"
)

// claudeData returns the directory of real Claude Code transcripts:
// $SESSIONSTORE_SHARED_DATA/claude-code, or shared/data/claude-code in a
// directory above the package's. Without it the test skips, and fails
// under CI.
func claudeData(t *testing.T) string {
	var dirs []string
	if d := os.Getenv("SESSIONSTORE_SHARED_DATA"); d != "" {
		dirs = append(dirs, filepath.Join(d, "claude-code"))
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	for d := wd; ; d = filepath.Dir(d) {
		dirs = append(dirs, filepath.Join(d, "shared", "data", "claude-code"))
		if filepath.Dir(d) == d {
			break
		}
	}
	dirs = append(dirs, "/work/shared/data/claude-code")
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
		t.Fatal("no shared/data/claude-code above the package (or $SESSIONSTORE_SHARED_DATA)")
	}
	t.Skip("no shared/data/claude-code")
	return ""
}

// claudeEvents reads a Claude Code transcript, in file order, as the
// events a harness would have appended: user text, assistant text,
// thinking and tool_use blocks, tool_result blocks.
func claudeEvents(t *testing.T, path string) []sessionstore.Event {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var evs []sessionstore.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var line struct {
			Type    string `json:"type"`
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || (line.Type != "user" && line.Type != "assistant") {
			continue
		}
		var s string
		if json.Unmarshal(line.Message.Content, &s) == nil {
			evs = append(evs, sessionstore.UserText(s))
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Thinking  string          `json:"thinking"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(line.Message.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch {
			case b.Type == "text" && line.Type == "user":
				evs = append(evs, sessionstore.UserText(b.Text))
			case b.Type == "text":
				evs = append(evs, sessionstore.AssistantText(b.Text))
			case b.Type == "thinking":
				evs = append(evs, sessionstore.AssistantMessage(sessionstore.Message{Reasoning: b.Thinking}))
			case b.Type == "tool_use":
				c := sessionstore.ToolCall{CallID: b.ID, Name: b.Name, Arguments: b.Input}
				evs = append(evs, sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{c}}), sessionstore.ToolCallEvent(c))
			case b.Type == "tool_result":
				out := string(b.Content)
				if json.Unmarshal(b.Content, &s) == nil {
					out = s
				}
				evs = append(evs, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: b.ToolUseID, Output: out, IsError: b.IsError}))
			}
		}
	}
	require.NoError(t, sc.Err())
	return ids(evs...)
}

// wireServer plays a Chat Completions endpoint that checks what the
// Chat Completions API requires of a conversation: every tool message
// answers a call of the assistant message before its run of tool
// messages, and every call is answered before the next non-tool message.
// It counts calls and results, and answers "ok".
func wireServer(calls, results *int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		open := map[string]bool{}
		problem := ""
		for i, m := range req.Messages {
			if m.Role != "tool" && len(open) > 0 {
				problem = fmt.Sprintf("message %d (%s) before the results of %v", i, m.Role, open)
			}
			switch m.Role {
			case "assistant":
				clear(open)
				for _, c := range m.ToolCalls {
					*calls++
					open[c.ID] = true
					if !json.Valid([]byte(c.Function.Arguments)) {
						problem = fmt.Sprintf("message %d: arguments of %s are not JSON", i, c.ID)
					}
				}
			case "tool":
				*results++
				if !open[m.ToolCallID] {
					problem = fmt.Sprintf("message %d: result %s without its call", i, m.ToolCallID)
				}
				delete(open, m.ToolCallID)
			default:
				clear(open)
			}
			if problem != "" {
				break
			}
		}
		if problem != "" {
			http.Error(w, problem, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
}

func transcripts(t *testing.T) []string {
	var files []string
	require.NoError(t, filepath.WalkDir(claudeData(t), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	return files
}

// Every real transcript becomes messages LangChainGo's OpenAI model
// sends as a request the Chat Completions API accepts: results paired
// with their calls.
func TestRealTranscripts(t *testing.T) {
	files := transcripts(t)
	var calls, results int
	srv := wireServer(&calls, &results)
	defer srv.Close()
	llm, err := openai.New(openai.WithBaseURL(srv.URL), openai.WithToken("test"), openai.WithModel("gpt-4o-mini"))
	require.NoError(t, err)
	ctx := context.Background()
	sent := 0
	for _, path := range files {
		msgs, err := Messages(claudeEvents(t, path))
		require.NoError(t, err, path)
		if len(msgs) == 0 {
			continue
		}
		resp, err := llm.GenerateContent(ctx, msgs)
		require.NoError(t, err, path)
		r, err := Reply(resp)
		require.NoError(t, err, path)
		assert.Equal(t, "ok", r.Text, path)
		sent++
	}
	t.Logf("%d transcripts sent: %d tool calls, %d results", sent, calls, results)
	assert.Positive(t, calls)
	assert.Equal(t, calls, results, "a real transcript's calls all have results, recorded or synthetic")
}
