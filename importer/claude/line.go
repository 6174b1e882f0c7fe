package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
)

// record is one line of a transcript: the members this package reads.
type record struct {
	Type              string          `json:"type"`
	UUID              string          `json:"uuid"`
	ParentUUID        *string         `json:"parentUuid"`
	LogicalParentUUID string          `json:"logicalParentUuid"`
	IsSidechain       bool            `json:"isSidechain"`
	SessionID         string          `json:"sessionId"`
	AgentID           string          `json:"agentId"`
	Timestamp         string          `json:"timestamp"`
	Cwd               string          `json:"cwd"`
	GitBranch         string          `json:"gitBranch"`
	Version           string          `json:"version"`
	Subtype           string          `json:"subtype"`
	IsCompactSummary  bool            `json:"isCompactSummary"`
	Message           json.RawMessage `json:"message"`
	ToolUseResult     json.RawMessage `json:"toolUseResult"`
	CompactMetadata   *struct {
		PreTokens int64 `json:"preTokens"`
	} `json:"compactMetadata"`
	Summary  string `json:"summary"`
	LeafUUID string `json:"leafUuid"`

	time   time.Time       // Timestamp parsed
	msg    *message        // Message decoded, for user and assistant lines
	raw    json.RawMessage // the line, for a KindCustom record
	placed bool            // its events are made (a reader's mark)

	hist *historyLine // a file-history-snapshot line's members (history.go)
	// histErr is what is wrong with a file-history-snapshot line: it
	// counts only for an import given the file history.
	histErr string
}

// message is the Anthropic Messages shape of a user or assistant line.
type message struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`

	text   string  // Content when it is a string
	blocks []block // Content when it is an array
}

// providerState reports whether b is a block Anthropic's API wants back
// verbatim: a thinking block with its signature, a redacted_thinking
// block.
func (b *block) providerState() bool {
	return b.Type == "thinking" && b.Signature != "" || b.Type == "redacted_thinking"
}

// block is one content block of a message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		MediaType string `json:"media_type"`
	} `json:"source"`
}

// errLine is what parseLine finds wrong with a line; Read wraps it in an
// importer.LineError that names the file and line.
type errLine struct{ msg string }

func (e *errLine) Error() string { return e.msg }

func lineErrorf(format string, args ...any) error {
	return &errLine{fmt.Sprintf(format, args...)}
}

// parseLine decodes one line of a transcript. A line that is not a JSON
// object, has no type, or is a conversation record (one with a uuid)
// without a valid timestamp (RFC 3339, from 1970 to 2262: see
// importer.Storable) or, for user and assistant lines, without a
// message, is an error. It never panics, whatever the bytes.
func parseLine(data []byte) (*record, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, lineErrorf("not a JSON object")
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, lineErrorf("not valid JSON: %v", err)
	}
	if r.Type == "" {
		return nil, lineErrorf("no type")
	}
	r.raw = data
	if r.UUID == "" {
		if r.Type == historyType {
			r.hist, r.histErr = parseHistory(data)
			r.raw = nil // not kept: no event holds it
		}
		return &r, nil // not part of the conversation tree
	}
	t, err := time.Parse(time.RFC3339Nano, r.Timestamp)
	if err != nil {
		return nil, lineErrorf("%s record %s: bad timestamp %q", r.Type, r.UUID, r.Timestamp)
	}
	if !importer.Storable(t) {
		return nil, lineErrorf("%s record %s: timestamp %s is outside 1970 to 2262, which the store cannot hold", r.Type, r.UUID, r.Timestamp)
	}
	r.time = t.UTC()
	if r.ParentUUID != nil && *r.ParentUUID == r.UUID {
		return nil, lineErrorf("%s record %s names itself as its parent", r.Type, r.UUID)
	}
	if r.Type == "user" || r.Type == "assistant" {
		if len(r.Message) == 0 || string(r.Message) == "null" {
			return nil, lineErrorf("%s record %s has no message", r.Type, r.UUID)
		}
		var m message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			return nil, lineErrorf("%s record %s: bad message: %v", r.Type, r.UUID, err)
		}
		if err := m.decodeContent(); err != nil {
			return nil, lineErrorf("%s record %s: bad message content: %v", r.Type, r.UUID, err)
		}
		r.msg = &m
	}
	return &r, nil
}

// decodeContent decodes Content, a string or an array of blocks.
func (m *message) decodeContent() error {
	c := bytes.TrimSpace(m.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
		return nil
	case c[0] == '"':
		return json.Unmarshal(c, &m.text)
	case c[0] == '[':
		return json.Unmarshal(c, &m.blocks)
	}
	return errors.New("neither a string nor an array")
}

// placeholder stands for a block that has no text: an image, a document.
func placeholder(b block) string {
	if b.Source != nil && b.Source.MediaType != "" {
		return "[" + b.Type + ": " + b.Source.MediaType + "]"
	}
	return "[" + b.Type + "]"
}

// resultOutput is the text of a tool_result block's content: a string, or
// the text of its blocks one per line, a placeholder for each block without
// text.
func resultOutput(content json.RawMessage) string {
	c := bytes.TrimSpace(content)
	if len(c) == 0 || string(c) == "null" {
		return ""
	}
	var s string
	if c[0] == '"' && json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []block
	if c[0] == '[' && json.Unmarshal(c, &blocks) == nil {
		parts := make([]string, 0, len(blocks))
		for _, b := range blocks {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			} else {
				parts = append(parts, placeholder(b))
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(c) // another JSON value: kept as it is
}

// userEvents maps a user line's message: runs of text (and placeholders
// for images) become user messages, and each tool_result block a tool
// result, in the order of the blocks. A message with no content is one
// empty user message.
func userEvents(m *message) []sessionstore.Event {
	if m.blocks == nil {
		return []sessionstore.Event{sessionstore.UserMessage(sessionstore.Message{Content: m.text})}
	}
	var out []sessionstore.Event
	var text []string
	flush := func() {
		if text != nil {
			out = append(out, sessionstore.UserMessage(sessionstore.Message{Content: strings.Join(text, "\n")}))
			text = nil
		}
	}
	for _, b := range m.blocks {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_result":
			flush()
			out = append(out, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: b.ToolUseID, Output: resultOutput(b.Content), IsError: b.IsError}))
		default:
			text = append(text, placeholder(b))
		}
	}
	flush()
	if len(out) == 0 {
		out = append(out, sessionstore.UserMessage(sessionstore.Message{}))
	}
	return out
}

// assistantEvents maps an assistant line's message: one assistant message
// (its text blocks as Content, thinking as Reasoning, tool_use blocks as
// ToolCalls, the model and the usage the line records, and its signed
// thinking and redacted_thinking blocks as ProviderState, "anthropic",
// each block's JSON as the line holds it), then one tool call event per
// tool_use block, in order. Blocks of other types (server tools) are left
// out.
func assistantEvents(m *message) []sessionstore.Event {
	msg := sessionstore.Message{Content: m.text, Model: m.Model}
	if u := m.Usage; u != nil {
		msg.Usage = &sessionstore.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	}
	var raw []json.RawMessage // the blocks as the line holds them, for provider state
	for _, b := range m.blocks {
		if b.providerState() {
			if json.Unmarshal(m.Content, &raw) != nil || len(raw) != len(m.blocks) {
				raw = nil // not the array decodeContent read: cannot be
			}
			break
		}
	}
	var text, thinking []string
	for i, b := range m.blocks {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "thinking":
			thinking = append(thinking, b.Thinking)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, sessionstore.ToolCall{CallID: b.ID, Name: b.Name, Arguments: validJSON(b.Input)})
		}
		if b.providerState() && raw != nil {
			msg.ProviderState = append(msg.ProviderState, sessionstore.ProviderState{Provider: "anthropic", Type: b.Type, Data: bytes.Clone(bytes.TrimSpace(raw[i]))})
		}
	}
	if m.blocks != nil {
		msg.Content = strings.Join(text, "\n\n")
	}
	msg.Reasoning = strings.Join(thinking, "\n\n")
	out := []sessionstore.Event{sessionstore.AssistantMessage(msg)}
	for _, c := range msg.ToolCalls {
		out = append(out, sessionstore.ToolCallEvent(c))
	}
	return out
}

// validJSON returns raw, or nil if it is empty or null.
func validJSON(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}
