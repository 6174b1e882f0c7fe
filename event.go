package sessionstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/jsoncompact"
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
	reserved bool  // a record of the store's own (workspace.go), which may begin with reservedMark
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
	if _, ok := eventline.KindCodeOf([]byte(ev.Kind)); !ok {
		return nil, invalidEventf("unknown kind %q", ev.Kind)
	}
	if _, ok := eventline.RoleCodeOf([]byte(ev.Role)); !ok {
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
	if ev.Kind == KindCustom && !ev.reserved && bytes.HasPrefix(rec, []byte(reservedMark)) {
		return nil, invalidEventf(`a custom record beginning with the member "sessionstore" is the store's own (workspace snapshots and state: workspace.go)`)
	}
	if ev.Kind != KindCustom && string(rec) == "null" {
		return nil, invalidEventf("a %s event needs a record (Record is null)", ev.Kind)
	}
	if len(rec) > maxSize {
		return nil, fmt.Errorf("%w: %w: %d bytes, limit %d", ErrInvalidEvent, ErrRecordTooLarge, len(rec), maxSize)
	}
	return rec, nil
}

// The line formats' types (internal/eventline), under the names the
// package's engine has used for them.
type (
	header   = eventline.Header
	payload  = eventline.Payload
	location = eventline.Location
	entry    = eventline.Entry
	preview  = eventline.Preview
)

// headerOf is the header of ev's line.
func headerOf(ev *Event) header {
	k, _ := eventline.KindCodeOf([]byte(ev.Kind))
	r, _ := eventline.RoleCodeOf([]byte(ev.Role))
	return header{ID: ev.ID, ParentID: ev.ParentID, BranchFrom: ev.BranchFrom, Time: ev.Time.UnixNano(), Kind: k, Role: r}
}

// fillHeader copies h into ev.
func fillHeader(ev *Event, h *header) {
	ev.ID, ev.ParentID, ev.BranchFrom = h.ID, h.ParentID, h.BranchFrom
	ev.Kind, ev.Role = Kind(h.Kind.String()), Role(h.Role.String())
	ev.Time = time.Unix(0, h.Time).UTC()
}

// encodeEvent appends the framed chunk line of ev (whose Record is already
// compact) to dst, inline.
func encodeEvent(dst []byte, ev *Event) []byte {
	h := headerOf(ev)
	return eventline.AppendEvent(dst, &h, eventline.Inline(ev.Record))
}

// fillPayload sets the payload fields of ev, copying an inline record.
func fillPayload(ev *Event, p payload) {
	ev.Size = p.Size
	if p.Blob {
		ev.Digest = string(canonical.AppendDigest(nil, p.Digest))
		return
	}
	ev.Record = bytes.Clone(p.Record)
}
