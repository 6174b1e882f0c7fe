// Package codex imports the rollouts of the Codex CLI
// (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) into a sessionstore Store.
//
// A rollout is a JSONL file of lines {"timestamp", "type", "payload"}:
// session_meta (the session id, cwd, originator, cli_version, git),
// response_item (the items of the model conversation), compacted (a
// compaction: its summary message and, in current versions, the
// replacement history), event_msg (what the UI showed, which repeats the
// response items) and turn_context (the settings of a turn). Rollouts
// written before this wrapper existed hold the session meta and the
// response items as bare lines; they are read too.
//
// A rollout has no ids: it is a chain, and each event's id is importer.ID
// of the session id and the line number (with an index for a line that
// gives several events), so importing a rollout that grew adds only its
// new lines. Mapping:
//
//   - session_meta: a KindCustom event (the payload, with "type"
//     "session_meta"), the root.
//   - message: a user or assistant Message (its text items joined by
//     newlines; an assistant's Model is the newest turn_context's); a message of another role (developer, system) a
//     KindCustom event holding the item.
//   - reasoning: an assistant Message whose Reasoning is the summary text
//     (the reasoning text when there is no summary). A reasoning item
//     with encrypted_content is also provider state, which the Responses
//     API wants back before the items it preceded: Provider "openai",
//     Type "reasoning", Data the item's JSON as the rollout holds it (the
//     Responses API reasoning item: type, id, summary, encrypted_content,
//     ...). It goes on the tool call that follows it (the KindToolCall
//     event's ToolCall.ProviderState) or, when an assistant message
//     follows, that Message's ProviderState, custom items between (a web
//     search call) passed over; several in a row go on it in order. When
//     the turn ends first (a user message, a tool output, a compaction, a
//     rollback, the end of the rollout), it stays on the reasoning's own
//     Message. It is never part of a message's text.
//   - function_call, custom_tool_call, local_shell_call: a KindToolCall
//     (the arguments as JSON; a custom tool's input as a JSON string;
//     a shell call's action, named "local_shell").
//   - function_call_output, custom_tool_call_output: a KindToolResult
//     (IsError when the output says success false).
//   - any other item (web_search_call, ghost_snapshot, ...), and any line
//     of a type this package does not know: a KindCustom event holding it.
//   - compacted: a KindCompaction whose Summary.Text is the compacted
//     message, then, as its children, the history Codex goes on with: the
//     replacement history's items, or for a rollout without one, what
//     Codex rebuilds (the user messages it keeps, then the summary as a
//     user message). Store.Load then returns the compaction followed by
//     the history Codex resumes with, item for item and in Codex's order.
//     The user message that holds the summary (the last of that history)
//     is a KindCustom event holding the item, not a user Message: the
//     compaction opens the context Load returns and carries the summary
//     (the store's rule for every compaction, which previews, exports and
//     convo read), so a user message repeating it would give a model the
//     summary twice. A model (convo) sees it once, at the start of the
//     context, where Codex puts it last, after the user messages it
//     keeps: the content is Codex's, the order the store's. A harness
//     that wants Codex's order maps that custom event back to a user
//     message (convo.Options.Custom) and renders the compaction without
//     its text.
//   - event_msg thread_rolled_back: Codex drops the last num_turns user
//     turns; the import branches there, with a KindCustom marker (the
//     event's payload) as the first event of the new branch, so the
//     dropped turns stay in the tree but leave the active path.
//   - other event_msg lines and turn_context lines: not events (the
//     newest turn_context's model is Meta.Model).
//
// Meta: ID is importer.ID("codex:"+session id, its time), CreatedAt the
// session_meta's timestamp, WorkingDir its cwd, Labels "source"
// ("codex"), "source_path" (the file's absolute path, invalid UTF-8
// replaced), "source_id" (the session id), and "originator",
// "cli_version", "git_branch", "git_commit" when the rollout names them.
//
// Bad input: a line that is not a JSON object with a type is reported as
// an *importer.LineError (wrapping importer.ErrMalformed) with the file
// and line, and the rest of the file is imported; so is a line longer
// than importer.MaxLineSize (importer.ErrLineTooLong), never held whole.
// A timestamp outside 1970 to 2262, which the store cannot hold, is
// reported and not used: the line takes the session's start time. A file
// whose first line looks like another tool's (a Claude Code transcript, a
// Pi session) is an *importer.FormatError, and nothing of it is written.
// A session the store refuses for its content (importer.SessionProblem,
// such as a record over its Options.MaxRecordSize) is reported for its
// file, with no empty session left, and the other files are imported.
//
// Durability: what Import writes goes through importer.Write, so when
// Import returns, every event it appended is durable, and importing the
// same files again adds nothing.
package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
)

// Source is the value of the "source" label of an imported session.
const Source = "codex"

// userMessageBudget is the number of tokens of user messages Codex keeps
// when it rebuilds the history of a compaction without a replacement
// history (four bytes a token, as Codex estimates).
const userMessageBudget = 20_000

// line is one line of a rollout, the legacy bare form normalized.
type line struct {
	n       int
	time    time.Time
	typ     string
	payload json.RawMessage
}

type wire struct {
	Timestamp  string          `json:"timestamp"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	ID         string          `json:"id"`          // legacy session meta
	RecordType string          `json:"record_type"` // legacy state lines
}

// itemTypes are the response item types a legacy rollout writes bare.
var itemTypes = map[string]bool{
	"message": true, "reasoning": true, "function_call": true, "function_call_output": true,
	"local_shell_call": true, "custom_tool_call": true, "custom_tool_call_output": true,
	"web_search_call": true, "ghost_snapshot": true, "compaction": true,
}

// parseLine decodes one line of a rollout. It fails for a line that is
// not a JSON object with a type (or, in the legacy form, a session id),
// and for a wrapped line without a payload object.
func parseLine(data []byte) (line, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return line{}, fmt.Errorf("not a JSON rollout line: %w", err)
	}
	l := line{typ: w.Type, payload: w.Payload}
	if w.Timestamp != "" {
		if t, err := time.Parse(time.RFC3339Nano, w.Timestamp); err == nil {
			l.time = t.UTC()
		}
	}
	switch {
	case len(w.Payload) > 0:
		if w.Type == "" {
			return line{}, errors.New(`a payload without a "type"`)
		}
		if w.Payload[0] != '{' {
			return line{}, fmt.Errorf("%s line whose payload is not an object", w.Type)
		}
	case w.RecordType != "":
		l.typ = "state" // legacy bookkeeping, not part of the conversation
	case w.Type == "" && w.ID != "":
		l.typ, l.payload = "session_meta", json.RawMessage(data)
	case itemTypes[w.Type]:
		l.typ, l.payload = "response_item", json.RawMessage(data)
	case w.Type == "":
		return line{}, errors.New(`no "type"`)
	default:
		return line{}, fmt.Errorf("%s line without a payload", w.Type)
	}
	l.payload = slices.Clone(l.payload)
	return l, nil
}

type sessionMeta struct {
	ID         string `json:"id"`
	Timestamp  string `json:"timestamp"`
	Cwd        string `json:"cwd"`
	Originator string `json:"originator"`
	CLIVersion string `json:"cli_version"`
	Git        *struct {
		CommitHash string `json:"commit_hash"`
		Branch     string `json:"branch"`
	} `json:"git"`
}

type contentItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type item struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   []contentItem   `json:"content"`
	Summary   []contentItem   `json:"summary"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     string          `json:"input"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Action    json.RawMessage `json:"action"`
	// EncryptedContent is a reasoning item's reasoning, which only the
	// provider reads: the item is then provider state (see pushItem).
	EncryptedContent string `json:"encrypted_content"`
}

func texts(items []contentItem) string {
	var parts []string
	for _, c := range items {
		switch c.Type {
		case "input_text", "output_text", "text", "summary_text", "reasoning_text":
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// arguments keeps a function call's arguments as JSON: the JSON a string
// holds, or the string itself when it holds none.
func arguments(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return slices.Clone(raw) // an object already
	}
	if s == "" {
		return nil
	}
	if json.Valid([]byte(s)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(s)) == nil {
			return buf.Bytes()
		}
	}
	b, _ := json.Marshal(s)
	return b
}

// maxOutputDepth bounds the objects output unwraps: Codex writes one,
// {content, success}, around a string or content items.
const maxOutputDepth = 4

// output reads a tool output: a string, content items, or an object
// {content, success} whose content is one of these; isErr is the
// outermost object's success false. Objects nested in content are
// unwrapped in a loop, at most maxOutputDepth of them (each unwrapping
// reads what it holds again): deeper content is kept as its JSON.
func output(raw json.RawMessage) (text string, isErr bool) {
	for depth := 0; ; depth++ {
		if depth == maxOutputDepth {
			return string(bytes.TrimSpace(raw)), isErr
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, isErr
		}
		var items []contentItem
		if json.Unmarshal(raw, &items) == nil {
			return texts(items), isErr
		}
		var obj struct {
			Content json.RawMessage `json:"content"`
			Success *bool           `json:"success"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", isErr
		}
		if depth == 0 {
			isErr = obj.Success != nil && !*obj.Success
		}
		raw = obj.Content
	}
}

// itemEvent maps a response item to its event; it is the item decoded
// (its zero value for a payload that is no item).
func itemEvent(raw json.RawMessage) (ev sessionstore.Event, it item) {
	if json.Unmarshal(raw, &it) != nil {
		return customEvent(raw), item{}
	}
	return itemEventOf(raw, &it), it
}

// itemEventOf maps the item it, decoded from raw, to its event.
func itemEventOf(raw json.RawMessage, it *item) sessionstore.Event {
	switch it.Type {
	case "message":
		switch it.Role {
		case "user":
			return sessionstore.UserText(texts(it.Content))
		case "assistant":
			return sessionstore.AssistantText(texts(it.Content))
		}
	case "reasoning":
		text := texts(it.Summary)
		if text == "" {
			text = texts(it.Content)
		}
		return sessionstore.AssistantMessage(sessionstore.Message{Reasoning: text})
	case "function_call":
		return sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: it.CallID, Name: it.Name, Arguments: arguments(it.Arguments)})
	case "custom_tool_call":
		in, _ := json.Marshal(it.Input)
		return sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: it.CallID, Name: it.Name, Arguments: in})
	case "local_shell_call":
		id := it.CallID
		if id == "" {
			id = it.ID
		}
		var args json.RawMessage
		if len(it.Action) > 0 && string(it.Action) != "null" {
			args = slices.Clone(it.Action)
		}
		return sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: id, Name: "local_shell", Arguments: args})
	case "function_call_output", "custom_tool_call_output":
		out, isErr := output(it.Output)
		return sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: it.CallID, Output: out, IsError: isErr})
	}
	return customEvent(raw)
}

func customEvent(raw json.RawMessage) sessionstore.Event {
	return sessionstore.Event{Kind: sessionstore.KindCustom, Record: slices.Clone(raw)}
}

// contextualPrefixes open the user-role messages Codex adds itself
// (environment and instructions), which are not user turns.
var contextualPrefixes = []string{"<environment_context>", "<user_instructions>", "<turn_aborted>", "# agents.md instructions", "<user_shell_command>"}

func contextual(text string) bool {
	t := strings.ToLower(strings.TrimLeft(text, " \t\r\n"))
	for _, p := range contextualPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// histItem is an event of the history Codex holds at a point of the
// rollout: the active path since the newest compaction.
type histItem struct {
	id, parent uuid.UUID
	user       bool   // a user message that is a user turn
	text       string // its text
}

// stats counts what reading a file saw.
type stats = importer.FileStats

// Read parses the rollout at path without writing anything. It returns
// the session, the problems of single lines (each an *importer.LineError;
// the rest of the file was read), and an error for a file it cannot read
// or that holds no rollout line at all.
func Read(path string) (*importer.Session, []error, error) {
	s, errs, _, err := readFile(path)
	return s, errs, err
}

func readFile(path string) (*importer.Session, []error, stats, error) {
	return importer.ReadPath(path, read)
}

func read(r io.Reader, path, abs string) (*importer.Session, []error, stats, error) {
	var (
		errs  []error
		lines []line
		first = true // no line that is not blank read yet
	)
	lr := importer.NewLineReader(r, path, 0)
	for {
		data, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, importer.ErrLineTooLong) {
			errs = append(errs, err)
			first = false
			continue
		}
		if err != nil {
			return nil, errs, lr.Stats(), fmt.Errorf("codex: read %s: %w", path, err)
		}
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) == 0 {
			continue
		}
		if first {
			first = false
			if err := importer.WrongFormat(path, importer.FormatCodex, trimmed); err != nil {
				return nil, nil, lr.Stats(), err
			}
		}
		l, perr := parseLine(trimmed)
		if perr != nil {
			errs = append(errs, importer.Malformed(path, n, "%v", perr))
			continue
		}
		l.n = n
		if !l.time.IsZero() && !importer.Storable(l.time) {
			errs = append(errs, importer.Malformed(path, n, "timestamp %s is outside 1970 to 2262, which the store cannot hold: the session's start time is used", l.time.Format(time.RFC3339Nano)))
			l.time = time.Time{}
		}
		lines = append(lines, l)
	}
	st := lr.Stats()
	if len(lines) == 0 {
		return nil, errs, st, importer.Malformed(path, 1, "no rollout line")
	}
	b := &builder{path: path}
	b.meta(lines, abs)
	for _, l := range lines {
		b.add(l)
	}
	b.settle()
	b.errs = append(errs, b.errs...)
	if n := len(b.s.Events); n > 0 {
		b.s.Head = b.s.Events[n-1].ID
	}
	return b.s, b.errs, st, nil
}

// waitingState is a reasoning item's provider state that waits for the
// tool call or message it goes on (see pushItem).
type waitingState struct {
	event int // the index of the reasoning item's own event
	state sessionstore.ProviderState
}

type builder struct {
	waiting []waitingState
	path    string
	sid     string // the session id, keying the events
	created time.Time
	s       *importer.Session
	tip     uuid.UUID // the event the next one follows
	model   string    // the model of the newest turn_context
	hist    []histItem
	turns   []int // the indexes in hist of its user turns, kept with it so that a rollback takes no scan
	errs    []error
}

// meta sets the session's metadata from the first session_meta line and
// the newest turn_context.
func (b *builder) meta(lines []line, abs string) {
	b.s = &importer.Session{Path: b.path}
	m := sessionstore.Meta{Labels: map[string]string{"source": Source, "source_path": strings.ToValidUTF8(abs, "\uFFFD")}}
	found := false
	for _, l := range lines {
		switch l.typ {
		case "session_meta":
			if found {
				continue
			}
			var sm sessionMeta
			if json.Unmarshal(l.payload, &sm) != nil || sm.ID == "" {
				continue
			}
			found = true
			b.sid = sm.ID
			m.WorkingDir = sm.Cwd
			b.created = l.time
			if t, err := time.Parse(time.RFC3339Nano, sm.Timestamp); err == nil && importer.Storable(t) {
				b.created = t.UTC()
			} else if err == nil {
				b.errs = append(b.errs, importer.Malformed(b.path, l.n, "session start %s is outside 1970 to 2262, which the store cannot hold: the line's time is used", sm.Timestamp))
			}
			for k, v := range map[string]string{"originator": sm.Originator, "cli_version": sm.CLIVersion} {
				if v != "" {
					m.Labels[k] = v
				}
			}
			if sm.Git != nil {
				if sm.Git.Branch != "" {
					m.Labels["git_branch"] = sm.Git.Branch
				}
				if sm.Git.CommitHash != "" {
					m.Labels["git_commit"] = sm.Git.CommitHash
				}
			}
		case "turn_context":
			var tc struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(l.payload, &tc) == nil && tc.Model != "" {
				m.Model = tc.Model
			}
		}
	}
	if !found {
		b.sid = strings.ToValidUTF8(strings.TrimSuffix(filepath.Base(b.path), ".jsonl"), "\uFFFD")
		b.created = lines[0].time
		b.errs = append(b.errs, importer.Malformed(b.path, lines[0].n, "no session_meta line: the session is named after the file, %q", b.sid))
	}
	m.Labels["source_id"] = b.sid
	m.ID = importer.ID("codex:"+b.sid, b.created)
	m.CreatedAt = b.created
	b.s.Meta = m
}

// states hands the waiting provider state to the event being pushed.
func (b *builder) states() []sessionstore.ProviderState {
	out := make([]sessionstore.ProviderState, len(b.waiting))
	for i, w := range b.waiting {
		out[i] = w.state
	}
	b.waiting = nil
	return out
}

// settle puts the waiting provider state on the reasoning items' own
// events: nothing came that it goes on.
func (b *builder) settle() {
	for _, w := range b.waiting {
		ev := &b.s.Events[w.event]
		m, err := ev.Message()
		if err != nil {
			continue
		}
		m.ProviderState = append(m.ProviderState, w.state)
		ev.Record = sessionstore.AssistantMessage(m).Record
	}
	b.waiting = nil
}

// push appends ev as the child of the tip, with the key's id.
func (b *builder) push(key string, at time.Time, ev sessionstore.Event) uuid.UUID {
	if at.IsZero() {
		at = b.created
	}
	ev.Time = at
	ev.ID = importer.ID("codex:"+b.sid+":"+key, at)
	ev.ParentID = b.tip
	b.s.Events = append(b.s.Events, ev)
	b.tip = ev.ID
	return ev.ID
}

// pushItem appends a response item's event and records it in the history.
//
// A reasoning item with encrypted_content is provider state (Provider
// "openai", Type "reasoning", Data the item's JSON as the rollout holds
// it): the Responses API wants it back, in stateless requests, before
// the output items it preceded. It goes on the next tool call
// (ToolCall.ProviderState) or assistant message (Message.ProviderState)
// that follows it, other items that are no model turn (KindCustom)
// between; if a user message, a tool output, a compaction, a rollback or
// the end of the rollout comes first, it stays on the reasoning item's own
// event (settle). The reasoning's summary is the event's Reasoning, as
// before; the state is never text.
func (b *builder) pushItem(key string, at time.Time, raw json.RawMessage) {
	parent := b.tip
	ev, it := itemEvent(raw)
	switch {
	case it.Type == "reasoning" && it.EncryptedContent != "":
		b.waiting = append(b.waiting, waitingState{event: len(b.s.Events), state: sessionstore.ProviderState{Provider: "openai", Type: "reasoning", Data: slices.Clone(bytes.TrimSpace(raw))}})
	case len(b.waiting) > 0 && ev.Kind == sessionstore.KindToolCall:
		c, err := ev.ToolCall()
		if err == nil {
			c.ProviderState = b.states()
			ev = sessionstore.ToolCallEvent(c)
		}
	case len(b.waiting) > 0 && ev.Kind == sessionstore.KindMessage && ev.Role == sessionstore.RoleAssistant && it.Type == "message":
		m, err := ev.Message()
		if err == nil {
			m.ProviderState = b.states()
			ev = sessionstore.AssistantMessage(m)
		}
	case ev.Kind != sessionstore.KindCustom:
		b.settle()
	}
	if ev.Kind == sessionstore.KindMessage && ev.Role == sessionstore.RoleAssistant && b.model != "" {
		m, _ := ev.Message()
		m.Model = b.model
		ev = sessionstore.AssistantMessage(m)
	}
	h := histItem{parent: parent}
	if ev.Kind == sessionstore.KindMessage && ev.Role == sessionstore.RoleUser {
		m, _ := ev.Message()
		h.text = m.Content
		h.user = !contextual(m.Content)
	}
	h.id = b.push(key, at, ev)
	if h.user {
		b.turns = append(b.turns, len(b.hist))
	}
	b.hist = append(b.hist, h)
}

func (b *builder) add(l line) {
	key := fmt.Sprint(l.n)
	switch l.typ {
	case "session_meta":
		b.push(key, l.time, sessionstore.Event{Kind: sessionstore.KindCustom, Record: withType("session_meta", l.payload)})
	case "response_item":
		b.pushItem(key, l.time, l.payload)
	case "compacted":
		b.compacted(l, key)
	case "event_msg":
		var ev struct {
			Type     string `json:"type"`
			NumTurns int    `json:"num_turns"`
		}
		if json.Unmarshal(l.payload, &ev) == nil && ev.Type == "thread_rolled_back" {
			b.rollback(l, key, ev.NumTurns)
		}
	case "turn_context":
		var tc struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(l.payload, &tc) == nil && tc.Model != "" {
			b.model = tc.Model
		}
	case "state":
	default:
		b.push(key, l.time, customEvent(withType(l.typ, l.payload)))
	}
}

// withType returns the object payload with "type" set to typ first, unless
// it has a type already.
func withType(typ string, payload json.RawMessage) json.RawMessage {
	var probe struct {
		Type *string `json:"type"`
	}
	if json.Unmarshal(payload, &probe) == nil && probe.Type != nil {
		return slices.Clone(payload)
	}
	t, _ := json.Marshal(typ)
	out := append([]byte(`{"type":`), t...)
	// parseLine made the payload an object; its members, if any, follow
	// the new type. An empty object may hold white space: "{ }".
	if members := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(payload), []byte("{"))); len(members) > 0 && members[0] != '}' {
		out = append(out, ',')
		return append(out, members...)
	}
	return append(out, '}')
}

// compacted appends a compaction and the history Codex goes on with.
func (b *builder) compacted(l line, key string) {
	b.settle()
	var c struct {
		Message            string            `json:"message"`
		ReplacementHistory []json.RawMessage `json:"replacement_history"`
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(l.payload, &probe); err != nil {
		b.errs = append(b.errs, importer.Malformed(b.path, l.n, "compacted payload: %v", err))
		return
	}
	if err := json.Unmarshal(l.payload, &c); err != nil {
		b.errs = append(b.errs, importer.Malformed(b.path, l.n, "compacted payload: %v", err))
		return
	}
	rh, ok := probe["replacement_history"]
	replaced := ok && string(rh) != "null"

	// What Codex keeps of the user messages, for a compaction without a
	// replacement history: the newest within the budget.
	var users []string
	if !replaced {
		budget := userMessageBudget
		for i := len(b.hist) - 1; i >= 0 && budget > 0; i-- {
			h := b.hist[i]
			if !h.user {
				continue
			}
			tokens := (len(h.text) + 3) / 4
			if tokens <= budget {
				users = append(users, h.text)
				budget -= tokens
				continue
			}
			users = append(users, truncate(h.text, budget*4))
			break
		}
		slices.Reverse(users)
	}

	rec := sessionstore.CompactionRecord{Summary: sessionstore.Summary{Text: c.Message}, Summarized: b.tip}
	b.push(key, l.time, sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, rec))
	b.hist, b.turns = b.hist[:0], b.turns[:0]
	if replaced {
		for i, raw := range c.ReplacementHistory {
			k := fmt.Sprintf("%s:%d", key, i)
			if isSummary(raw, c.Message) {
				b.pushSummary(k, l.time, raw)
				continue
			}
			b.pushItem(k, l.time, raw)
		}
		return
	}
	for i, text := range users {
		b.pushItem(fmt.Sprintf("%s:user:%d", key, i), l.time, userItem(text))
	}
	summary := c.Message
	if summary == "" {
		summary = "(no summary available)"
	}
	b.pushSummary(key+":summary", l.time, userItem(summary))
}

// isSummary reports whether the replacement history's item raw is the
// user message that holds the compaction's summary.
func isSummary(raw json.RawMessage, summary string) bool {
	var it item
	return summary != "" && json.Unmarshal(raw, &it) == nil && it.Type == "message" && it.Role == "user" && texts(it.Content) == summary
}

// pushSummary appends the user message item that holds a compaction's
// summary, as Codex's history has it, as a KindCustom event: the
// compaction's Summary gives the model the summary (see the package doc),
// and a user message would give it a second time. It is no user turn.
func (b *builder) pushSummary(key string, at time.Time, raw json.RawMessage) {
	b.settle()
	parent := b.tip
	id := b.push(key, at, customEvent(raw))
	b.hist = append(b.hist, histItem{id: id, parent: parent})
}

// userItem is a user message item of text, as Codex writes one.
func userItem(text string) json.RawMessage {
	raw, _ := json.Marshal(struct {
		Type    string        `json:"type"`
		Role    string        `json:"role"`
		Content []contentItem `json:"content"`
	}{"message", "user", []contentItem{{Type: "input_text", Text: text}}})
	return raw
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// rollback drops the last n user turns from the active path, as Codex
// does, by branching before the first of them with a marker event.
func (b *builder) rollback(l line, key string, n int) {
	b.settle()
	if n <= 0 {
		return
	}
	if len(b.turns) == 0 {
		return
	}
	k := max(len(b.turns)-n, 0) // the first turn dropped
	cut := b.turns[k]
	b.tip = b.hist[cut].parent
	b.hist, b.turns = b.hist[:cut], b.turns[:k]
	if b.tip == uuid.Nil {
		// The root is a session_meta event in a well-formed rollout;
		// without one, the marker cannot start a second tree.
		b.errs = append(b.errs, importer.Malformed(b.path, l.n, "rollback to before the first event, which has no parent: not imported"))
		b.tip = b.s.Events[len(b.s.Events)-1].ID
		return
	}
	b.push(key, l.time, customEvent(l.payload))
}

// Import reads the rollouts named by paths (files, or directories walked
// for their .jsonl files) and writes each session to st with
// importer.Write, calling opts.Progress after each. A problem with one
// line or one file (a malformed line, a file that is no rollout, a
// session the store already holds with other content, metadata the store
// refuses) is added to the
// report's Errors and the import goes on; the error returned is what
// stopped it: ctx's, or the store's.
func Import(ctx context.Context, st *sessionstore.Store, paths []string, opts *importer.Options) (importer.Report, error) {
	files, err := importer.Files(paths)
	if err != nil {
		return importer.Report{}, err
	}
	return importer.ImportFiles(ctx, st, "codex", files, readFile, opts)
}
