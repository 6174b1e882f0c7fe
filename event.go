package sessionstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/jsoncompact"
	"github.com/sessionstore/sessionstore/internal/jsonl"
)

// Kind says what an event records. The set is closed: Append refuses other
// values, so a reader can always interpret what it finds. KindCustom is the
// escape hatch for harness-specific records.
type Kind string

// The event kinds.
const (
	KindMessage       Kind = "message"        // a user or assistant message (record: Message)
	KindToolCall      Kind = "tool_call"      // a tool invocation (record: ToolCall)
	KindToolResult    Kind = "tool_result"    // a tool's output (record: ToolResult)
	KindCompaction    Kind = "compaction"     // a summary that starts the active context (record: CompactionRecord)
	KindBranchSummary Kind = "branch_summary" // a summary of an abandoned branch
	KindCustom        Kind = "custom"         // anything else a harness records
)

// kindCode is the compact in-memory form of a Kind; 0 is invalid.
type kindCode uint8

var kinds = [...]Kind{"", KindMessage, KindToolCall, KindToolResult, KindCompaction, KindBranchSummary, KindCustom}

func kindCodeOf(b []byte) (kindCode, bool) {
	for i := 1; i < len(kinds); i++ {
		if string(kinds[i]) == string(b) {
			return kindCode(i), true
		}
	}
	return 0, false
}

func parseKind(b []byte) (Kind, bool) {
	c, ok := kindCodeOf(b)
	return kinds[c], ok
}

// Role says who produced an event. System prompts are agent configuration,
// not events, so there is no system role.
type Role string

// The roles. RoleNone is for events no participant speaks (compactions,
// custom records).
const (
	RoleNone      Role = ""
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// roleCode is the compact in-memory form of a Role; 0 is RoleNone.
type roleCode uint8

var roles = [...]Role{RoleNone, RoleUser, RoleAssistant, RoleTool}

func roleCodeOf(b []byte) (roleCode, bool) {
	for i := range roles {
		if string(roles[i]) == string(b) {
			return roleCode(i), true
		}
	}
	return 0, false
}

func parseRole(b []byte) (Role, bool) {
	c, ok := roleCodeOf(b)
	return roles[c], ok
}

// Event is one entry of a session's timeline. The store assigns ParentID,
// BranchFrom and Time on Append, and ID unless the caller sets it (a
// UUIDv7 the caller chose makes the append idempotent: see
// [Store.AppendWith]); the caller supplies Kind, Role and Record.
//
// encoding/json encodes an Event with the member names of a chunk line
// (id, parent_id, branch_from, kind, role, timestamp, record, and for a blob
// digest and size), with size for an inline record too, leaving out
// branch_from when it is uuid.Nil; an unresolved blob event has
// "record":null.
type Event struct {
	ID         uuid.UUID       `json:"id"`                   // UUIDv7, assigned by Append unless the caller chose it (retry.go)
	ParentID   uuid.UUID       `json:"parent_id"`            // uuid.Nil for a root
	BranchFrom uuid.UUID       `json:"branch_from,omitzero"` // uuid.Nil unless the event starts a branch (then equal to ParentID)
	Kind       Kind            `json:"kind"`
	Role       Role            `json:"role,omitempty"`
	Time       time.Time       `json:"timestamp"` // assigned by Append, UTC
	Record     json.RawMessage `json:"record"`    // the payload, any JSON value; stored in compact form

	// Digest and Size describe the record as stored. Size is the length
	// of its compact JSON. A record larger than Options.BlobThreshold is
	// stored as a blob: Digest is then "sha256:<hex>" of its bytes, and
	// an event from Store.Event is unresolved (Record nil) until
	// Store.Resolve reads the blob. Both are set by the store; Append
	// ignores them.
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size"`

	buildErr error // set by a helper whose record could not be encoded
}

// Decode unmarshals the event's record into v.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Record, v); err != nil {
		return fmt.Errorf("sessionstore: decode %s record of event %s: %w", e.Kind, e.ID, err)
	}
	return nil
}

// Message is the record of a KindMessage event.
type Message struct {
	Content   string `json:"content"`
	Reasoning string `json:"reasoning,omitempty"`
	Model     string `json:"model,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`
	// ToolCalls are the tool calls an assistant message announces: what
	// the model asked for, in its order. A harness records each with a
	// KindToolCall event before running it; a call announced here whose
	// event never became durable was not started, and
	// [Store.RepairInterruptedToolCalls] answers it with OutcomeNotStarted.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ProviderState is what the provider returned with the message's
	// text or reasoning that it wants back verbatim in later requests
	// (signed thinking blocks, reasoning items, thought signatures), in
	// the order the reply gave it. See [ProviderState].
	ProviderState []ProviderState `json:"provider_state,omitempty"`
}

// ProviderState is state a model provider returned with a part of a
// reply, opaque to everyone but that provider, which wants it back
// verbatim when the part is sent again: Anthropic's signed thinking and
// redacted thinking blocks, an OpenAI Responses reasoning item (with its
// encrypted_content when the request is stateless), a Gemini part's
// thought signature. Without it a provider may refuse the history (Gemini
// 3 refuses function calls without their signature) or lose the model's
// reasoning across the turn.
//
// A reply's message-level state (before or around its text) goes in
// [Message.ProviderState]; state that belongs to one tool call (a thought
// signature on a function call part, a reasoning item that preceded the
// call) in that call's [ToolCall.ProviderState], in the message's
// announced call and in its KindToolCall event alike.
//
// The store keeps Data byte for byte: it is encoded as base64 in the
// record, so the compaction of records to compact JSON never touches it,
// and it is never part of a preview, a summary, a convo message's text or
// a Markdown export (convo passes it to the adapters, which send it only
// to the provider that named it); what shows a record as it is stored
// (Event, JSONL export, the inspector's show and path) shows it, base64. It lives in the event's record, so
// every original event keeps it: a compaction's summary replaces the turns
// before it without rewriting them, and the turns Load keeps after a
// compaction are the original events, state included. Export writes and
// reads it back as part of the record.
type ProviderState struct {
	// Provider names the API that made it, as the adapters write it:
	// "anthropic", "openai" or "gemini" (an adapter of another provider
	// picks its own lower-case name). An adapter sends back only its
	// own provider's state.
	Provider string `json:"provider"`
	// Type is the provider's name for what Data holds, as the adapter
	// that wrote it defines it ("thinking", "redacted_thinking",
	// "reasoning", "thought_signature", ...).
	Type string `json:"type"`
	// Data is the state itself, as the provider's API sent it.
	Data []byte `json:"data"`
}

// Usage is the token accounting a provider reports for one response.
type Usage struct {
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// ToolCall is the record of a KindToolCall event.
type ToolCall struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ProviderState is the provider's opaque state for this call (a
	// Gemini function call's thought signature, an OpenAI reasoning item
	// that came before the call), sent back with it. See [ProviderState].
	ProviderState []ProviderState `json:"provider_state,omitempty"`
}

// ToolResult is the record of a KindToolResult event.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Output  string `json:"output"`
	IsError bool   `json:"is_error,omitempty"`
	// Outcome qualifies a result the tool did not produce itself. Empty
	// means a normal result: Output is what the tool returned.
	// OutcomeUnknown and OutcomeNotStarted mark a synthetic result
	// written by [Store.RepairInterruptedToolCalls].
	Outcome string `json:"outcome,omitempty"`
}

// OutcomeUnknown is the [ToolResult.Outcome] of a synthetic result that
// stands in for one lost in a crash: the tool call was durable but its
// result was not, so whether the tool ran, and what it changed, is
// unknown. A harness should retry only read-only or idempotent work and
// verify possible side effects (or ask the user) before repeating
// anything else.
const OutcomeUnknown = "outcome_unknown"

// OutcomeNotStarted is the [ToolResult.Outcome] of a synthetic result
// that answers a tool call an assistant message announced
// ([Message.ToolCalls]) but whose KindToolCall event never became
// durable: the harness records the call before running the tool, so the
// tool never ran and changed nothing. The call may be made again.
const OutcomeNotStarted = "not_started"

// NewEvent returns an event of the given kind and role whose record is v
// encoded as JSON. An encoding error is reported by Append.
func NewEvent(kind Kind, role Role, v any) Event {
	ev := Event{Kind: kind, Role: role}
	ev.Record, ev.buildErr = json.Marshal(v)
	if ev.buildErr != nil {
		ev.buildErr = fmt.Errorf("encode %s record: %w", kind, ev.buildErr)
	}
	return ev
}

// ShortID is the short form of an id that the examples and the inspector
// print: the first 8 hex digits of its last group. The first digits of a
// UUIDv7 are its time, shared by the events of a session made in the same
// minute; the last group is random. The inspector takes it (or any
// unambiguous prefix of it, or of the full id) wherever it takes an id.
func ShortID(id uuid.UUID) string { return id.String()[24:32] }

// The message constructors come in two forms: XMessage takes a whole
// [Message] (content, reasoning, model, usage), XText only its content.

// UserMessage returns a user message event with the record m.
func UserMessage(m Message) Event {
	return NewEvent(KindMessage, RoleUser, m)
}

// UserText returns a user message event whose content is text:
// UserMessage(Message{Content: text}).
func UserText(text string) Event {
	return UserMessage(Message{Content: text})
}

// AssistantMessage returns an assistant message event with the record m.
func AssistantMessage(m Message) Event {
	return NewEvent(KindMessage, RoleAssistant, m)
}

// AssistantText returns an assistant message event whose content is text:
// AssistantText(text).
func AssistantText(text string) Event {
	return AssistantMessage(Message{Content: text})
}

// ToolCallEvent returns an assistant's tool call event.
func ToolCallEvent(c ToolCall) Event {
	return NewEvent(KindToolCall, RoleAssistant, c)
}

// ToolResultEvent returns a tool result event.
//
// Append stores a tool result whose CallID names no tool call on the path
// as it is, on purpose: the store records what happened and does not
// check a conversation's grammar. A result may arrive after the user
// branched away from its call, answer a call made in another session (a
// subagent's), or come from an imported transcript that keeps calls and
// results apart; and checking would make each such append read the
// records of the path (the index holds no call ids) instead of costing
// one write. Model APIs reject a result without its call, so the code
// that builds a request pairs them (calls left without a result after a
// crash are what InterruptedToolCalls finds).
func ToolResultEvent(r ToolResult) Event {
	return NewEvent(KindToolResult, RoleTool, r)
}

// Message decodes the record of a KindMessage event.
func (e Event) Message() (Message, error) {
	var m Message
	return m, e.decodeKind(KindMessage, &m)
}

// ToolCall decodes the record of a KindToolCall event.
func (e Event) ToolCall() (ToolCall, error) {
	var c ToolCall
	return c, e.decodeKind(KindToolCall, &c)
}

// ToolResult decodes the record of a KindToolResult event.
func (e Event) ToolResult() (ToolResult, error) {
	var r ToolResult
	return r, e.decodeKind(KindToolResult, &r)
}

func (e Event) decodeKind(k Kind, v any) error {
	if e.Kind != k {
		return fmt.Errorf("%w: event %s is a %s, not a %s", ErrInvalidEvent, e.ID, e.Kind, k)
	}
	return e.Decode(v)
}

// prepareRecord validates an event given to Append and returns its record in
// compact form.
func prepareRecord(ev Event, maxSize int) ([]byte, error) {
	if ev.buildErr != nil {
		return nil, invalidEventf("%v", ev.buildErr)
	}
	if ev.ParentID != uuid.Nil || ev.BranchFrom != uuid.Nil || !ev.Time.IsZero() {
		return nil, invalidEventf("ParentID, BranchFrom and Time are assigned by Append (use Branch to choose a parent, AppendWith to state the one expected)")
	}
	if err := checkCallerID(ev.ID); err != nil {
		return nil, err
	}
	if _, ok := parseKind([]byte(ev.Kind)); !ok {
		return nil, invalidEventf("unknown kind %q", ev.Kind)
	}
	if _, ok := parseRole([]byte(ev.Role)); !ok {
		return nil, invalidEventf("unknown role %q", ev.Role)
	}
	if len(ev.Record) == 0 {
		if ev.Kind != KindCustom {
			return nil, invalidEventf("a %s event needs a record (Record is empty)", ev.Kind)
		}
		return []byte("null"), nil
	}
	// encoding/json.Compact's result, several times faster on long strings
	// (internal/jsoncompact): a 64 KiB tool result took 0.75 ms of an
	// append's CPU.
	rec, err := jsoncompact.Append(make([]byte, 0, len(ev.Record)), ev.Record)
	if err != nil {
		return nil, invalidEventf("record is not valid JSON: %v", err)
	}
	if ev.Kind != KindCustom && string(rec) == "null" {
		return nil, invalidEventf("a %s event needs a record (Record is null)", ev.Kind)
	}
	if len(rec) > maxSize {
		return nil, fmt.Errorf("%w: %w: %d bytes, limit %d", ErrInvalidEvent, ErrRecordTooLarge, len(rec), maxSize)
	}
	return rec, nil
}

// timeLayout is the on-disk timestamp format: RFC 3339 in UTC with
// nanoseconds, trailing zeros trimmed.
const timeLayout = time.RFC3339Nano

// header is what every line format says of an event besides its record, in
// a compact, pointer-free form (the in-memory index holds one per event).
type header struct {
	ID, ParentID, BranchFrom uuid.UUID
	Time                     int64 // Unix nanoseconds
	Kind                     kindCode
	Role                     roleCode
}

func headerOf(ev *Event) header {
	k, _ := kindCodeOf([]byte(ev.Kind))
	r, _ := roleCodeOf([]byte(ev.Role))
	return header{ID: ev.ID, ParentID: ev.ParentID, BranchFrom: ev.BranchFrom, Time: ev.Time.UnixNano(), Kind: k, Role: r}
}

// fill copies the header into ev.
func (h *header) fill(ev *Event) {
	ev.ID, ev.ParentID, ev.BranchFrom = h.ID, h.ParentID, h.BranchFrom
	ev.Kind, ev.Role = kinds[h.Kind], roles[h.Role]
	ev.Time = time.Unix(0, h.Time).UTC()
}

// appendHeader writes the members every line starts with, from "{" to the
// timestamp's closing quote. The member order is part of the format.
func appendHeader(dst []byte, h *header) []byte {
	dst = append(dst, `{"id":"`...)
	dst = canonical.AppendUUID(dst, h.ID)
	dst = append(dst, `","parent_id":"`...)
	dst = canonical.AppendUUID(dst, h.ParentID)
	dst = append(dst, '"')
	if h.BranchFrom != uuid.Nil {
		dst = append(dst, `,"branch_from":"`...)
		dst = canonical.AppendUUID(dst, h.BranchFrom)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, kinds[h.Kind]...)
	dst = append(dst, '"')
	if h.Role != 0 {
		dst = append(dst, `,"role":"`...)
		dst = append(dst, roles[h.Role]...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"timestamp":"`...)
	dst = time.Unix(0, h.Time).UTC().AppendFormat(dst, timeLayout)
	return append(dst, '"')
}

// payload is how a chunk line holds its record: inline, or as a blob
// reference (digest and size, with "record":null).
type payload struct {
	Record []byte // compact JSON; nil for a blob
	Blob   bool
	Digest [32]byte // SHA-256 of the record, for a blob
	Size   int64    // length of the record's compact JSON
	// ParentAt is where the parent's line is (format 2; zero Length when
	// the line names none): Load follows these from HEAD without the index.
	ParentAt location
}

// inline returns the payload of a record stored in the chunk line.
func inline(rec []byte) payload { return payload{Record: rec, Size: int64(len(rec))} }

// encodeEventLine appends the framed chunk line of an event to dst. The
// member order is part of the format:
//
//	{header...,"record":<json>,"crc":"…"}                              inline
//	{header...,"digest":"sha256:<hex>","size":<n>,"record":null,"crc":"…"}  blob
//
// In format 2 the line of an event with a parent also holds, after the
// header, the location of the parent's line: its chunk, offset and length,
// as in the index (`,"parent_loc":[3,81920,412]`).
func encodeEventLine(dst []byte, h *header, p payload) []byte {
	start := len(dst)
	obj := appendHeader(dst, h)
	if p.ParentAt.Length != 0 {
		obj = append(obj, `,"parent_loc":[`...)
		obj = strconv.AppendUint(obj, uint64(p.ParentAt.Chunk), 10)
		obj = append(obj, ',')
		obj = strconv.AppendInt(obj, p.ParentAt.Offset, 10)
		obj = append(obj, ',')
		obj = strconv.AppendUint(obj, uint64(p.ParentAt.Length), 10)
		obj = append(obj, ']')
	}
	if p.Blob {
		obj = append(obj, `,"digest":"`...)
		obj = canonical.AppendDigest(obj, p.Digest)
		obj = append(obj, `","size":`...)
		obj = strconv.AppendInt(obj, p.Size, 10)
		obj = append(obj, `,"record":null}`...)
	} else {
		obj = append(obj, `,"record":`...)
		obj = append(obj, p.Record...)
		obj = append(obj, '}')
	}
	return jsonl.SealTail(obj, start)
}

// encodeEvent appends the framed chunk line of ev (whose Record is already
// compact) to dst, inline.
func encodeEvent(dst []byte, ev *Event) []byte {
	h := headerOf(ev)
	return encodeEventLine(dst, &h, inline(ev.Record))
}

// lineParser reads a line in the exact layout the store writes. Decoding is
// positional: members must come in format order with no whitespace, so a
// line is accepted only in its canonical form. The first error sticks.
type lineParser struct {
	b   []byte
	pos int
	err error
}

func (p *lineParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
	}
}

// lit consumes s or fails.
func (p *lineParser) lit(s string) {
	if p.err != nil {
		return
	}
	if !bytes.HasPrefix(p.b[p.pos:], []byte(s)) {
		p.fail("expected %q", s)
		return
	}
	p.pos += len(s)
}

// maybe consumes s if it comes next.
func (p *lineParser) maybe(s string) bool {
	if p.err != nil || !bytes.HasPrefix(p.b[p.pos:], []byte(s)) {
		return false
	}
	p.pos += len(s)
	return true
}

// uuid consumes a canonical lower-case uuid.
func (p *lineParser) uuid() uuid.UUID {
	if p.err != nil {
		return uuid.Nil
	}
	if len(p.b)-p.pos < 36 {
		p.fail("truncated uuid")
		return uuid.Nil
	}
	id, err := canonical.ParseUUID(p.b[p.pos : p.pos+36])
	if err != nil {
		p.fail("%v", err)
		return uuid.Nil
	}
	p.pos += 36
	return id
}

// token consumes bytes up to (not including) the next quote.
func (p *lineParser) token() []byte {
	if p.err != nil {
		return nil
	}
	i := bytes.IndexByte(p.b[p.pos:], '"')
	if i < 0 {
		p.fail("unterminated string")
		return nil
	}
	t := p.b[p.pos : p.pos+i]
	p.pos += i
	return t
}

// int consumes a canonical non-negative decimal integer up to max.
func (p *lineParser) int(max int64) int64 {
	if p.err != nil {
		return 0
	}
	start := p.pos
	var n int64
	for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
		d := int64(p.b[p.pos] - '0')
		if d > max || n > (max-d)/10 { // n*10+d > max, checked without overflowing
			p.fail("integer %s out of range", p.b[start:p.pos+1])
			return 0
		}
		n = n*10 + d
		p.pos++
	}
	switch {
	case p.pos == start:
		p.fail("expected an integer")
	case p.pos-start > 1 && p.b[start] == '0':
		p.fail("integer with a leading zero")
	}
	return n
}

// location consumes the three numbers of a location, comma-separated.
func (p *lineParser) location() location {
	var l location
	l.Chunk = uint32(p.int(1<<31 - 1))
	p.lit(`,`)
	l.Offset = p.int(1 << 62)
	p.lit(`,`)
	l.Length = uint32(p.int(1<<32 - 1))
	return l
}

// header consumes the members appendHeader writes.
func (p *lineParser) header() header {
	var h header
	p.lit(`{"id":"`)
	h.ID = p.uuid()
	p.lit(`","parent_id":"`)
	h.ParentID = p.uuid()
	p.lit(`"`)
	if p.maybe(`,"branch_from":"`) {
		h.BranchFrom = p.uuid()
		p.lit(`"`)
		if p.err == nil && (h.BranchFrom != h.ParentID || h.BranchFrom == uuid.Nil) {
			p.fail("branch_from differs from parent_id")
		}
	}
	if p.err == nil && h.ID == uuid.Nil {
		p.fail("nil event id")
	}
	p.lit(`,"kind":"`)
	if k := p.token(); p.err == nil {
		var ok bool
		if h.Kind, ok = kindCodeOf(k); !ok {
			p.fail("unknown kind %q", k)
		}
	}
	p.lit(`"`)
	if p.maybe(`,"role":"`) {
		if r := p.token(); p.err == nil {
			var ok bool
			if h.Role, ok = roleCodeOf(r); !ok || h.Role == 0 {
				p.fail("unknown role %q", r)
			}
		}
		p.lit(`"`)
	}
	p.lit(`,"timestamp":"`)
	if ts := p.token(); p.err == nil {
		t, err := time.Parse(timeLayout, string(ts))
		if err != nil {
			p.fail("%v", err)
		}
		h.Time = t.UnixNano()
	}
	p.lit(`"`)
	return h
}

// recordEnd is where the record ends in a framed line: the checksum suffix
// `,"crc":"xxxxxxxx"}` follows it.
func recordEnd(line []byte) int { return len(line) - jsonl.SuffixLen }

// decodeEvent decodes a chunk line (without its newline) after checking its
// frame. An inline record is copied out of line; a blob stays unresolved.
func decodeEvent(line []byte) (Event, error) {
	h, p, err := decodeEventLine(line)
	if err != nil {
		return Event{}, err
	}
	var ev Event
	h.fill(&ev)
	p.fill(&ev)
	return ev, nil
}

// fill sets the payload fields of ev, copying an inline record.
func (p payload) fill(ev *Event) {
	ev.Size = p.Size
	if p.Blob {
		ev.Digest = string(canonical.AppendDigest(nil, p.Digest))
		return
	}
	ev.Record = bytes.Clone(p.Record)
}

// decodeEventLine checks and splits a chunk line into its header and its
// payload, whose record aliases line.
func decodeEventLine(line []byte) (header, payload, error) {
	return splitEventLine(line, true)
}

// readEventLine is decodeEventLine for a line the index located, on the
// read path (Load, Event): it checks the frame (CRC-32C) and the header but
// does not validate the record as JSON again. Every record was validated
// when it was appended, and every line of a chunk that was not indexed
// when it was written is decoded in full by the scan that indexes it
// (reconciliation), as Verify does for all; a line whose CRC-32C matches
// is, but for a one in 2^32 chance, the line written.
func readEventLine(line []byte) (header, payload, error) {
	return splitEventLine(line, false)
}

func splitEventLine(line []byte, validate bool) (header, payload, error) {
	if err := jsonl.Verify(line); err != nil {
		return header{}, payload{}, err
	}
	p := lineParser{b: line}
	h := p.header()
	var pl payload
	if p.maybe(`,"parent_loc":[`) {
		pl.ParentAt = p.location()
		p.lit(`]`)
		if p.err == nil && (h.ParentID == uuid.Nil || pl.ParentAt.Length == 0) {
			p.fail("parent_loc without a parent")
		}
	}
	if p.maybe(`,"digest":"`) {
		pl.Blob = true
		pl.Digest = p.digest()
		p.lit(`","size":`)
		pl.Size = p.int(maxRecordSizeLimit)
		p.lit(`,"record":null`)
		if p.err == nil && p.pos != recordEnd(line) {
			p.fail("unexpected data after a blob reference")
		}
	} else {
		p.lit(`,"record":`)
	}
	if p.err != nil {
		return header{}, payload{}, p.err
	}
	if !pl.Blob {
		pl.Record = line[p.pos:recordEnd(line)]
		pl.Size = int64(len(pl.Record))
		if validate && !json.Valid(pl.Record) {
			return header{}, payload{}, errors.New("record is not valid JSON")
		}
	}
	return h, pl, nil
}

// digest consumes "sha256:" and 64 lower-case hex digits.
func (p *lineParser) digest() [32]byte {
	var d [32]byte
	p.lit(canonical.DigestPrefix)
	if p.err != nil {
		return d
	}
	if len(p.b)-p.pos < canonical.DigestHexLen {
		p.fail("truncated digest")
		return d
	}
	d, err := canonical.ParseDigestHex(p.b[p.pos : p.pos+canonical.DigestHexLen])
	if err != nil {
		p.fail("%v", err)
		return d
	}
	p.pos += canonical.DigestHexLen
	return d
}
