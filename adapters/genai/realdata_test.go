package genai

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
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

// Every real transcript becomes contents that alternate roles (but for user text after function responses), answer
// each function call in the next content, and that the SDK's client
// sends as a request the server decodes back to the same contents.
func TestRealTranscripts(t *testing.T) {
	dir := claudeData(t)
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)

	var received []*genai.Content
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Contents []*genai.Content `json:"contents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		received = req.Contents
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]}}]}`))
	}))
	defer srv.Close()
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(t, err)

	var calls, responses int
	for _, path := range files {
		got, err := Contents(claudeEvents(t, path))
		require.NoError(t, err, path)
		if len(got) == 0 {
			continue
		}
		for i, c := range got {
			require.NotEmpty(t, c.Parts, path)
			if i > 0 && got[i-1].Role == c.Role {
				require.NotEqual(t, isResponse(got[i-1].Parts[0]), isResponse(c.Parts[0]), path)
			}
			var want []string
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					calls++
					want = append(want, p.FunctionCall.ID)
				}
			}
			if len(want) == 0 || i+1 == len(got) {
				continue // calls at the end are pending: the harness runs them
			}
			var answered []string
			for _, p := range got[i+1].Parts {
				if p.FunctionResponse != nil {
					responses++
					answered = append(answered, p.FunctionResponse.ID)
				}
			}
			require.Equal(t, want, answered, "%s: content %d's calls are answered in order by the next", path, i)
		}
		_, err = client.Models.GenerateContent(ctx, "gemini-2.5-flash", got, nil)
		require.NoError(t, err, path)
		sent, err := json.Marshal(got)
		require.NoError(t, err)
		back, err := json.Marshal(received)
		require.NoError(t, err)
		assert.JSONEq(t, string(sent), string(back), path)
	}
	t.Logf("%d transcripts: %d function calls, %d responses", len(files), calls, responses)
	assert.Positive(t, calls)
}
