// Package pi imports the sessions of the Pi coding agent into a
// sessionstore Store.
//
// A Pi session is a JSONL file: a header line (type "session", with the
// format version, the session id, its start time and working directory),
// then one entry per line. From version 2 on every entry has an id and a
// parentId, so the entries form a tree (branching in place); version 1
// files have no ids and are a chain in file order. An entry without a
// parent starts a new tree: Pi writes one when the user goes back to edit
// the first message. Pi's current position (its leaf) is the last entry of
// the file.
//
// Mapping, entry by entry (each event keeps the entry's time, and its id
// is importer.ID of the session id and the entry's id, or its line in a
// version 1 file):
//
//   - the header: a KindCustom event holding its JSON, the root; the
//     entries without a parent are its children, so every tree of the
//     file is kept, and a version 1 chain starts from it.
//   - message, role user: a user Message (the text blocks of its content).
//   - message, role assistant: an assistant Message (text as Content,
//     thinking as Reasoning, Model, Usage, its toolCall blocks as
//     ToolCalls), then one KindToolCall event per toolCall block after
//     it; the entry's children follow the last of them. What a thinking
//     block keeps for the provider (its thinkingSignature) is provider
//     state, never text: for a message of Anthropic's API (api
//     "anthropic-messages", or provider "anthropic" without an api) the
//     block the API returned, rebuilt from Pi's parts: Provider
//     "anthropic", Type "thinking" with Data
//     {"type":"thinking","thinking":...,"signature":...}, or for a
//     redacted block Type "redacted_thinking" with Data
//     {"type":"redacted_thinking","data":...}, in block order in the
//     Message's ProviderState; and a signature that is an OpenAI
//     Responses reasoning item (Pi keeps the item's JSON there): Provider
//     "openai", Type "reasoning", Data that JSON as Pi holds it, on the
//     toolCall that follows the block (in the announced call and its
//     KindToolCall event alike) or, when a text block follows first or
//     nothing does, on the Message. Gemini's thought signatures are not
//     kept.
//   - message, role toolResult: a KindToolResult.
//   - message, roles custom (hookMessage) and bashExecution (a command
//     the user ran, as "$ command" and its output), and custom_message
//     entries: a user Message, since Pi sends them to the model as user
//     messages; a bashExecution excluded from the context is a
//     KindCustom event.
//   - compaction: a KindCompaction whose Summary.Text is the summary
//     (and Summary.FilesChanged the details' modifiedFiles, when Pi's
//     summarizer listed them), TokensBefore its tokensBefore and FirstKept the first event of the
//     entry firstKeptEntryId names (firstKeptEntryIndex in version 1), so
//     that Store.Load returns what Pi rebuilds: the summary, the entries
//     kept from firstKeptEntryId up to the compaction, then the entries
//     after it.
//   - branch_summary: a KindBranchSummary, the child of the entry Pi
//     navigated to (AbandonedHead: the last event of the entry before it
//     in the file, which is the leaf Pi left unless Pi had moved its leaf
//     before without writing an entry; fromId names the target).
//   - every other entry (model_change, thinking_level_change, custom,
//     label, session_info, and types this package does not know): a
//     KindCustom event whose record is the entry's JSON as written, so the
//     tree keeps every entry and nothing is lost. They carry no message,
//     as in Pi, where they do not reach the model.
//
// Meta: ID is importer.ID("pi:"+header id, header time), CreatedAt the
// header's time, WorkingDir its cwd, Name the newest session_info name,
// Model the newest model named (by an assistant message or a
// model_change), Labels "source" ("pi"), "source_path" (the file's
// absolute path, invalid UTF-8 replaced) and "source_id" (Pi's session id).
//
// Bad input: a line that is not JSON, or an entry without an id in a
// version 2 file, is reported as an *importer.LineError (wrapping
// importer.ErrMalformed) with the file and line, and the rest of the file
// is read; so is a line longer than importer.MaxLineSize
// (importer.ErrLineTooLong), never held whole. An entry whose parent is
// not in the file (its line was malformed) is attached to the entry before
// it and reported. A timestamp outside 1970 to 2262, which the store
// cannot hold, is reported and not used: the entry takes the header's time
// (a header's such time leaves the session without one, and the store
// gives it the time of the import). A file whose first line looks like
// another tool's (a Claude Code transcript, a Codex rollout) is an
// *importer.FormatError, and nothing of it is written. A session the
// store refuses for its content (importer.SessionProblem, such as a
// record over its Options.MaxRecordSize) is reported for its file, with
// no empty session left, and the other files are imported.
//
// Durability: what Import writes goes through importer.Write, so when
// Import returns, every event it appended is durable, and importing the
// same files again adds nothing.
package pi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
)

// Source is the value of the "source" label of an imported session.
const Source = "pi"

// entry is one line of a Pi session file: the header or an entry.
type entry struct {
	Type      string          `json:"type"`
	Version   int             `json:"version"` // header
	ID        string          `json:"id"`
	ParentID  *string         `json:"parentId"`
	Timestamp json.RawMessage `json:"timestamp"` // ISO string; a number of ms in old files
	Cwd       string          `json:"cwd"`       // header

	Message *message `json:"message"`

	// compaction, branch_summary
	Summary             string `json:"summary"`
	FirstKeptEntryID    string `json:"firstKeptEntryId"`
	FirstKeptEntryIndex *int   `json:"firstKeptEntryIndex"` // version 1
	TokensBefore        int64  `json:"tokensBefore"`
	FromID              string `json:"fromId"`
	Details             *struct {
		ModifiedFiles []string `json:"modifiedFiles"`
	} `json:"details"`

	// model_change, session_info, custom_message
	ModelID string          `json:"modelId"`
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"`

	line int
	raw  json.RawMessage
}

// message is the message of a message entry.
type message struct {
	Role       string          `json:"role"`
	API        string          `json:"api"`      // an assistant message's: the API that wrote it ("anthropic-messages", "openai-responses", ...)
	Provider   string          `json:"provider"` // and the provider
	Content    json.RawMessage `json:"content"`  // a string or content blocks
	Model      string          `json:"model"`
	Usage      *usage          `json:"usage"`
	ToolCallID string          `json:"toolCallId"`
	IsError    bool            `json:"isError"`
	Timestamp  json.RawMessage `json:"timestamp"`
	Command    string          `json:"command"` // bashExecution
	Output     string          `json:"output"`  // bashExecution
	// ExcludeFromContext marks a bashExecution the model never sees.
	ExcludeFromContext bool `json:"excludeFromContext"`
}

type usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
}

// block is a content block of a message.
type block struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
	// ThinkingSignature is what the API returned with the thinking: an
	// Anthropic signature (or, Redacted, the redacted thinking's data),
	// or an OpenAI Responses reasoning item's JSON.
	ThinkingSignature string          `json:"thinkingSignature"`
	Redacted          bool            `json:"redacted"`
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Arguments         json.RawMessage `json:"arguments"`
}

// parseLine decodes one line of a Pi session file. It fails only for a
// line that is not a JSON object with a string "type".
func parseLine(line []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(line, &e); err != nil {
		return entry{}, fmt.Errorf("not a JSON entry: %w", err)
	}
	if e.Type == "" {
		return entry{}, errors.New(`no "type"`)
	}
	e.raw = json.RawMessage(line)
	return e, nil
}

// parseTime reads a timestamp written as an ISO string or as Unix
// milliseconds; the zero time if it is neither.
func parseTime(raw json.RawMessage) time.Time {
	if len(raw) == 0 {
		return time.Time{}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}
		}
		return t.UTC()
	}
	var ms float64
	if json.Unmarshal(raw, &ms) == nil && ms > 0 && ms < 1<<47 {
		return time.UnixMilli(int64(ms)).UTC()
	}
	return time.Time{}
}

// contentText returns the text of a content field: the string itself, or
// the text blocks joined by newlines (images carry no text).
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// stats counts what reading a file saw.
type stats = importer.FileStats

// Read parses the Pi session file at path without writing anything. It
// returns the session, the problems of single lines (each an
// *importer.LineError; the rest of the file was read), and an error for a
// file it cannot read at all: an I/O error, or a file whose first entry is
// not a session header (an *importer.LineError wrapping
// importer.ErrMalformed).
func Read(path string) (*importer.Session, []error, error) {
	s, errs, _, err := readFile(path)
	return s, errs, err
}

func readFile(path string) (*importer.Session, []error, stats, error) {
	return importer.ReadPath(path, read)
}

// read parses a session from r; path names it in errors, abs in labels.
func read(r io.Reader, path, abs string) (*importer.Session, []error, stats, error) {
	var (
		errs    []error
		entries []entry // the header first, as Pi indexes them
		first   = true  // no line that is not blank read yet
	)
	lr := importer.NewLineReader(r, path, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, importer.ErrLineTooLong) {
			errs = append(errs, err)
			first = false
			continue
		}
		if err != nil {
			return nil, errs, lr.Stats(), fmt.Errorf("pi: read %s: %w", path, err)
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		if first {
			first = false
			if err := importer.WrongFormat(path, importer.FormatPi, trimmed); err != nil {
				return nil, nil, lr.Stats(), err
			}
		}
		e, perr := parseLine(slices.Clone(trimmed))
		switch {
		case perr != nil:
			errs = append(errs, importer.Malformed(path, n, "%v", perr))
		case len(entries) == 0 && (e.Type != "session" || e.ID == ""):
			return nil, errs, lr.Stats(), importer.Malformed(path, n, "the first entry is not a Pi session header (type %q)", e.Type)
		default:
			e.line = n
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		return nil, errs, lr.Stats(), importer.Malformed(path, 1, "no Pi session header")
	}
	b := newBuilder(path, abs, entries[0])
	b.errs = append(errs, b.errs...)
	for i := 1; i < len(entries); i++ {
		b.add(entries, i)
	}
	return b.session(), b.errs, lr.Stats(), nil
}

// span is the events an entry became: the first (what FirstKept names)
// and the last (what its children hang from).
type span struct{ first, last uuid.UUID }

type builder struct {
	path    string
	header  entry
	version int
	created time.Time
	s       *importer.Session
	spans   map[string]span // by entry id
	lines   map[int]span    // by line, for version 1 indexes
	prev    uuid.UUID       // the last event of the entry read before
	head    uuid.UUID       // the header's event, the root
	errs    []error
}

func newBuilder(path, abs string, h entry) *builder {
	b := &builder{
		path:    path,
		header:  h,
		version: h.Version,
		spans:   make(map[string]span),
		lines:   make(map[int]span),
	}
	b.created = b.storable(parseTime(h.Timestamp), h.line, "the session has no start time")
	if b.version == 0 {
		b.version = 1 // version 1 headers have no version
	}
	b.s = &importer.Session{
		Path: path,
		Meta: sessionstore.Meta{
			ID:         importer.ID("pi:"+h.ID, b.created),
			WorkingDir: h.Cwd,
			CreatedAt:  b.created,
			Labels:     map[string]string{"source": Source, "source_path": strings.ToValidUTF8(abs, "\uFFFD"), "source_id": h.ID},
		},
	}
	hd := custom(&h)
	hd.Time = b.created
	// Keyed like the entries (by line in version 1, by id after), so that
	// a version 1 file Pi rewrote with ids is another tree, not more of it.
	hd.ID = importer.ID(b.key(&h)+":header", b.created)
	b.s.Events = append(b.s.Events, hd)
	b.head, b.prev = hd.ID, hd.ID
	return b
}

func (b *builder) session() *importer.Session {
	if n := len(b.s.Events); n > 0 {
		b.s.Head = b.s.Events[n-1].ID // Pi's leaf is the last entry
	}
	return b.s
}

// key names an entry's events in ID.
func (b *builder) key(e *entry) string {
	if b.version < 2 {
		return fmt.Sprintf("pi:%s:line:%d", b.header.ID, e.line)
	}
	return "pi:" + b.header.ID + ":" + e.ID
}

// parent finds the event entry i hangs from, reporting what is wrong;
// ok is false for an entry not imported.
func (b *builder) parent(entries []entry, i int) (uuid.UUID, bool) {
	e := &entries[i]
	if b.version < 2 {
		return b.prev, true
	}
	if e.ID == "" {
		b.errs = append(b.errs, importer.Malformed(b.path, e.line, "%s entry without an id", e.Type))
		return uuid.Nil, false
	}
	if _, dup := b.spans[e.ID]; dup {
		b.errs = append(b.errs, importer.Malformed(b.path, e.line, "entry id %q repeats an earlier entry's: not imported", e.ID))
		return uuid.Nil, false
	}
	if e.ParentID == nil || *e.ParentID == "" {
		return b.head, true // a tree of the file: the first, or a reset of the leaf
	}
	if sp, ok := b.spans[*e.ParentID]; ok {
		return sp.last, true
	}
	b.errs = append(b.errs, importer.Malformed(b.path, e.line, "entry %q names parent %q, which is not in the file: attached to the entry before it", e.ID, *e.ParentID))
	return b.prev, true
}

// add appends the events of entries[i].
func (b *builder) add(entries []entry, i int) {
	e := &entries[i]
	parent, ok := b.parent(entries, i)
	if !ok {
		return
	}
	at := b.storable(parseTime(e.Timestamp), e.line, "the header's time is used")
	if at.IsZero() && e.Message != nil {
		at = b.storable(parseTime(e.Message.Timestamp), e.line, "the header's time is used")
	}
	if at.IsZero() {
		at = b.created
	}
	key := b.key(e)
	var out []sessionstore.Event
	push := func(suffix string, ev sessionstore.Event) {
		ev.ID = importer.ID(key+suffix, at)
		ev.Time = at
		ev.ParentID = parent
		if len(out) > 0 {
			ev.ParentID = out[len(out)-1].ID
		}
		out = append(out, ev)
	}
	switch e.Type {
	case "message":
		if e.Message == nil {
			b.errs = append(b.errs, importer.Malformed(b.path, e.line, "message entry without a message: kept as a custom event"))
			push("", custom(e))
			break
		}
		b.message(e, push)
	case "custom_message":
		push("", sessionstore.UserText(contentText(e.Content)))
	case "compaction":
		rec := sessionstore.CompactionRecord{
			Summary:      summary(e),
			TokensBefore: e.TokensBefore,
			Summarized:   parent,
		}
		if b.version < 2 {
			// Pi's migration reads firstKeptEntryIndex as an index into
			// the file's entries, the header at 0.
			if k := e.FirstKeptEntryIndex; k != nil && *k > 0 && *k < i {
				rec.FirstKept = b.lines[entries[*k].line].first
			}
		} else if sp, ok := b.spans[e.FirstKeptEntryID]; ok {
			rec.FirstKept = sp.first
		}
		push("", sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, rec))
	case "branch_summary":
		// Pi appends the summary when it leaves its leaf for the
		// navigation target (the entry's parent, which fromId names too):
		// the leaf it left is the entry appended before.
		rec := sessionstore.BranchSummaryRecord{Summary: summary(e), AbandonedHead: b.prev}
		push("", sessionstore.NewEvent(sessionstore.KindBranchSummary, sessionstore.RoleNone, rec))
	default:
		switch e.Type {
		case "model_change":
			if e.ModelID != "" {
				b.s.Meta.Model = e.ModelID
			}
		case "session_info":
			if name := strings.TrimSpace(e.Name); name != "" {
				b.s.Meta.Name = name
			}
		}
		push("", custom(e))
	}
	b.s.Events = append(b.s.Events, out...)
	sp := span{first: out[0].ID, last: out[len(out)-1].ID}
	if b.version >= 2 {
		b.spans[e.ID] = sp
	}
	b.lines[e.line] = sp
	b.prev = sp.last
}

// storable returns t, or the zero time for a t the store cannot hold
// (importer.Storable), which it reports for the line with what is done
// instead (instead).
func (b *builder) storable(t time.Time, line int, instead string) time.Time {
	if t.IsZero() || importer.Storable(t) {
		return t
	}
	b.errs = append(b.errs, importer.Malformed(b.path, line, "timestamp %s is outside 1970 to 2262, which the store cannot hold: %s", t.Format(time.RFC3339Nano), instead))
	return time.Time{}
}

// summary is the Summary of a compaction or branch summary entry: its
// text, and the files Pi's default summarizer lists as modified.
func summary(e *entry) sessionstore.Summary {
	s := sessionstore.Summary{Text: e.Summary}
	if e.Details != nil {
		s.FilesChanged = slices.Clone(e.Details.ModifiedFiles)
	}
	return s
}

// custom is the KindCustom event of an entry: its JSON as written.
func custom(e *entry) sessionstore.Event {
	return sessionstore.Event{Kind: sessionstore.KindCustom, Record: slices.Clone(e.raw)}
}

// message appends the events of a message entry.
func (b *builder) message(e *entry, push func(string, sessionstore.Event)) {
	m := e.Message
	switch m.Role {
	case "user", "custom", "hookMessage":
		push("", sessionstore.UserText(contentText(m.Content)))
	case "bashExecution":
		if m.ExcludeFromContext {
			push("", custom(e))
			break
		}
		push("", sessionstore.UserText("$ "+m.Command+"\n"+m.Output))
	case "assistant":
		var blocks []block
		_ = json.Unmarshal(m.Content, &blocks) // a string or nothing: no blocks
		rec := sessionstore.Message{Model: m.Model}
		if len(blocks) == 0 {
			rec.Content = contentText(m.Content)
		}
		var text, thinking []string
		var waiting []sessionstore.ProviderState // reasoning items, for the call or text they preceded
		for _, bl := range blocks {
			switch bl.Type {
			case "text":
				text = append(text, bl.Text)
				rec.ProviderState = append(rec.ProviderState, waiting...)
				waiting = nil
			case "thinking":
				thinking = append(thinking, bl.Thinking)
				if st, ok := reasoningItem(bl.ThinkingSignature); ok {
					waiting = append(waiting, st)
				} else if st, ok := anthropicThinking(m, &bl); ok {
					rec.ProviderState = append(rec.ProviderState, st)
				}
			case "toolCall":
				c := sessionstore.ToolCall{CallID: bl.ID, Name: bl.Name, Arguments: rawArgs(bl.Arguments)}
				c.ProviderState, waiting = waiting, nil
				rec.ToolCalls = append(rec.ToolCalls, c)
			}
		}
		rec.ProviderState = append(rec.ProviderState, waiting...)
		if len(blocks) > 0 {
			rec.Content = strings.Join(text, "\n")
		}
		rec.Reasoning = strings.Join(thinking, "\n")
		if u := m.Usage; u != nil {
			rec.Usage = &sessionstore.Usage{InputTokens: u.Input, OutputTokens: u.Output, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite}
		}
		if m.Model != "" {
			b.s.Meta.Model = m.Model
		}
		push("", sessionstore.AssistantMessage(rec))
		for k, c := range rec.ToolCalls {
			push(fmt.Sprintf(":call:%d", k), sessionstore.ToolCallEvent(c))
		}
	case "toolResult":
		push("", sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: m.ToolCallID, Output: contentText(m.Content), IsError: m.IsError}))
	default:
		push("", custom(e))
	}
}

// reasoningItem returns the provider state of a thinking block's
// signature that is an OpenAI Responses reasoning item (Pi keeps the
// item's JSON there): the item as Pi holds it.
func reasoningItem(sig string) (sessionstore.ProviderState, bool) {
	if !strings.HasPrefix(sig, "{") {
		return sessionstore.ProviderState{}, false
	}
	var it struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(sig), &it) != nil || it.Type != "reasoning" {
		return sessionstore.ProviderState{}, false
	}
	return sessionstore.ProviderState{Provider: "openai", Type: "reasoning", Data: []byte(sig)}, true
}

// anthropicThinking returns the provider state of a signed thinking block
// of an Anthropic message (api "anthropic-messages", or provider
// "anthropic" in a message that names no api): the block the API returned,
// {"type":"thinking","thinking":...,"signature":...}, or for a redacted
// one {"type":"redacted_thinking","data":...}, which Pi keeps as its
// parts.
func anthropicThinking(m *message, bl *block) (sessionstore.ProviderState, bool) {
	if bl.ThinkingSignature == "" || (m.API != "anthropic-messages" && (m.API != "" || m.Provider != "anthropic")) {
		return sessionstore.ProviderState{}, false
	}
	var v any = struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}{"thinking", bl.Thinking, bl.ThinkingSignature}
	typ := "thinking"
	if bl.Redacted {
		typ = "redacted_thinking"
		v = struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{typ, bl.ThinkingSignature}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the text as written
	if enc.Encode(v) != nil {
		return sessionstore.ProviderState{}, false
	}
	return sessionstore.ProviderState{Provider: "anthropic", Type: typ, Data: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}, true
}

// rawArgs keeps a tool call's arguments when they are JSON, and drops a
// null.
func rawArgs(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" || !json.Valid(raw) {
		return nil
	}
	return slices.Clone(raw)
}

// Import reads the Pi session files named by paths (files, or directories
// walked for their .jsonl files) and writes each session to st with
// importer.Write, calling opts.Progress after each. A problem with one
// line or one file (a malformed line, a file that is not a Pi session, a
// session the store already holds with other content, metadata the store
// refuses) is added to the
// report's Errors and the import goes on; the error returned is what
// stopped it: ctx's, or the store's.
func Import(ctx context.Context, st *sessionstore.Store, paths []string, opts *importer.Options) (importer.Report, error) {
	files, err := importer.Files(paths)
	if err != nil {
		return importer.Report{}, err
	}
	return importer.ImportFiles(ctx, st, "pi", files, readFile, opts)
}
