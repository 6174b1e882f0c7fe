// Package genai connects a sessionstore session to Google's Gen AI SDK
// for Go (google.golang.org/genai, the Gemini API and Vertex AI):
// Contents turns the events of [sessionstore.Store.Load] into the
// []*genai.Content of a GenerateContent request, and Reply reads a
// *genai.GenerateContentResponse as a [convo.Reply], whose Events are
// appended with one AppendBatch.
//
// The rules of the conversion (tool calls paired with results, synthetic
// results for abandoned calls, compactions shown as user messages) are
// package convo's; this package maps its messages to the SDK's types:
//
//   - a user message, a compaction and a branch summary become a Text
//     part of a "user" content;
//   - an assistant message becomes a "model" content with a Text part
//     (when it has text) and one FunctionCall part per call (ID, Name,
//     Args: the stored arguments decoded as a JSON object);
//   - a tool result becomes a FunctionResponse part (ID, the call's Name,
//     Response {"output": output}, or {"error": output} for an error
//     result) of a "user" content.
//
// Consecutive contents of the same role are merged into one, so the
// results of parallel calls travel in one user content, as the API
// expects, in the order of their calls (a harness records results as its
// tools finish; without call ids the API pairs them by order). A content
// of function responses holds nothing else: the API takes the turn after
// a function call turn as that many responses, and refuses it (or reads
// the parts after the responses as a model turn) when text shares it, so
// user text that follows the responses (the user's next words, a branch
// summary) is a user content of its own. A content with no part is left
// out. Contents that would open with the model's turn start with a user
// content holding OpeningText. The reasoning of an
// assistant message is not sent: the API reads no thought text it did
// not sign.
//
// # Call ids
//
// The Gemini API may return function calls without an ID. Reply gives
// such a call a stable one, DerivedIDPrefix followed by 16 hex digits of
// the SHA-256 of the response's ResponseID, the call's position among
// the candidate's calls, its name and its arguments: the same response
// always yields the same ids, so a retried Reply appends the same events,
// and results pair with their calls in the store. Contents sends no ID
// for a call whose ID has that prefix (nor for its result): the API
// never issued it, and pairs such calls with their responses by order
// and name.
//
// # Thought signatures
//
// Gemini 3 models sign their function calls (Part.ThoughtSignature) and
// refuse a history whose calls come back without the signature (400
// "Function call is missing a thought_signature"); a signature on another
// part is the model's reasoning carried across the turn. Reply keeps each
// signature as provider state (sessionstore.ProviderState, stored byte for
// byte, never shown as text):
//
//	Provider "gemini" (ProviderName)
//	Type     "thought_signature" (StateThoughtSignature)
//	Data     the Part.ThoughtSignature bytes
//
// on the call's ToolCall.ProviderState for a function call part, and in
// Message.ProviderState, in part order, for a text (or thought) part.
// Contents sends each call's signature back on its FunctionCall part, and
// the message's last one on its Text part (the parts of a reply's text
// are sent as one part; the API signs a text reply's last part). Only
// state whose Provider is "gemini" is sent.
//
// A history without stored signatures (written before they were kept, by
// an importer, or by another provider's model) has none to send:
// ContentsWith with Options.ThoughtSignature puts a given value on the
// first function call part of each model content that has no stored
// signature (the Gemini API documents the placeholder value
// "skip_thought_signature_validator" for such histories, at the cost of
// the model's reasoning across the turn).
//
// The package writes nothing: what is durable is what the caller appends.
package genai

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"google.golang.org/genai"
)

// ErrNoCandidate is returned by Reply for a nil response or one without
// a candidate (a prompt the API blocked: the error then says why).
var ErrNoCandidate = errors.New("genai: response has no candidate")

// ErrArguments is returned by Contents for a stored tool call whose
// arguments are not a JSON object, and by Reply for function call
// arguments that do not encode as JSON; the error names the call.
var ErrArguments = errors.New("genai: tool call arguments are not a JSON object")

// DerivedIDPrefix starts the id Reply gives a function call that came
// without one (see the package doc).
const DerivedIDPrefix = "genai-"

// ProviderName is the Provider of the state this package writes and sends
// back; StateThoughtSignature its Type (see the package doc).
const (
	ProviderName          = "gemini"
	StateThoughtSignature = "thought_signature"
)

// OpeningText is the text of the user content Contents puts first when
// the context opens with the model's turn (a transcript that lost its
// first prompt, a subagent's that starts with its reply): the API refuses
// contents that start with a model turn, and wants a function call turn
// to follow a user turn.
const OpeningText = "(The record of this conversation starts with the model's turn.)"

// Options adjust ContentsWith.
type Options struct {
	// ThoughtSignature, when set, is the ThoughtSignature of the first
	// function call part of each model content that has no stored
	// signature: the fallback for histories without them (see the package
	// doc).
	ThoughtSignature []byte
}

// Contents returns the request contents of events, a context as
// Store.Load returns it (see the package doc). It is ContentsWith with
// no options.
//
// Errors: those of convo.Build (convo.ErrUnresolved, a record that is not
// its kind's shape); ErrArguments.
func Contents(events []sessionstore.Event) ([]*genai.Content, error) {
	return ContentsWith(events, nil)
}

// ContentsWith is Contents with options.
func ContentsWith(events []sessionstore.Event, opts *Options) ([]*genai.Content, error) {
	if opts == nil {
		opts = &Options{}
	}
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	var out []*genai.Content
	add := func(role string, parts ...*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role && isResponse(out[n-1].Parts[0]) == isResponse(parts[0]) {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, &genai.Content{Role: role, Parts: parts})
	}
	// The responses to a turn's calls wait in responses until the turn
	// ends, to go in the order of the calls (a harness records results
	// as the tools finish): without ids the API pairs them by order.
	order := map[string]int{}
	var responses []response
	flush := func() {
		slices.SortStableFunc(responses, func(a, b response) int { return cmp.Compare(a.order, b.order) })
		for _, r := range responses {
			add(genai.RoleUser, r.part)
		}
		responses = responses[:0]
	}
	for _, m := range c.Messages {
		if m.Role != sessionstore.RoleTool {
			flush()
		}
		switch m.Role {
		case sessionstore.RoleAssistant:
			var parts []*genai.Part
			if m.Text != "" {
				p := &genai.Part{Text: m.Text}
				if sigs := signatures(m.ProviderState); len(sigs) > 0 {
					p.ThoughtSignature = sigs[len(sigs)-1]
				}
				parts = append(parts, p)
			}
			clear(order)
			for i, tc := range m.ToolCalls {
				names[tc.CallID] = tc.Name
				order[tc.CallID] = i
				args, err := decodeArgs(tc.Arguments)
				if err != nil {
					return nil, fmt.Errorf("%w: call %q (%s): %v", ErrArguments, tc.CallID, tc.Name, err)
				}
				p := &genai.Part{FunctionCall: &genai.FunctionCall{ID: sendID(tc.CallID), Name: tc.Name, Args: args}}
				if sigs := signatures(tc.ProviderState); len(sigs) > 0 {
					p.ThoughtSignature = sigs[0]
				} else if i == 0 && opts.ThoughtSignature != nil {
					p.ThoughtSignature = opts.ThoughtSignature
				}
				parts = append(parts, p)
			}
			add(genai.RoleModel, parts...)
		case sessionstore.RoleTool:
			r := m.Result
			key := "output"
			if r.IsError {
				key = "error"
			}
			responses = append(responses, response{order: order[r.CallID], part: &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: sendID(r.CallID), Name: names[r.CallID], Response: map[string]any{key: r.Output},
			}}})
		default:
			if m.Text != "" {
				add(genai.RoleUser, &genai.Part{Text: m.Text})
			}
		}
	}
	flush()
	if len(out) > 0 && out[0].Role == genai.RoleModel {
		out = append([]*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{{Text: OpeningText}}}}, out...)
	}
	if out == nil {
		out = []*genai.Content{}
	}
	return out, nil
}

// signatures returns the thought signatures in st, in order.
func signatures(st []sessionstore.ProviderState) [][]byte {
	var out [][]byte
	for _, s := range st {
		if s.Provider == ProviderName && s.Type == StateThoughtSignature && len(s.Data) > 0 {
			out = append(out, s.Data)
		}
	}
	return out
}

// signature returns the provider state of a part's thought signature, or
// nil for a part without one.
func signature(p *genai.Part) []sessionstore.ProviderState {
	if len(p.ThoughtSignature) == 0 {
		return nil
	}
	return []sessionstore.ProviderState{{Provider: ProviderName, Type: StateThoughtSignature, Data: slices.Clone(p.ThoughtSignature)}}
}

// isResponse reports whether p is a function response: a content holds
// only those or none.
func isResponse(p *genai.Part) bool { return p.FunctionResponse != nil }

// response is a function response part and the position of its call.
type response struct {
	order int
	part  *genai.Part
}

func sendID(id string) string {
	if strings.HasPrefix(id, DerivedIDPrefix) {
		return ""
	}
	return id
}

// decodeArgs decodes stored arguments as a JSON object, numbers kept
// exact; none (or null) is no arguments.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var args map[string]any
	if err := d.Decode(&args); err != nil {
		return nil, err
	}
	return args, nil
}

// Reply returns the reply of a response's first candidate: its text
// parts, joined, as Text; its thought parts' text as Reasoning; its
// function calls as ToolCalls (see the package doc for the ids of calls
// that came without one); the parts' thought signatures as provider state
// (a call's on the call, the others on the message, see the package doc);
// ModelVersion as Model; and UsageMetadata as
// Usage (PromptTokenCount as input, CandidatesTokenCount plus
// ThoughtsTokenCount as output, CachedContentTokenCount as cache reads).
// A candidate without content (stopped for safety, say: see its
// FinishReason) gives a reply without text or calls.
//
// Errors: ErrNoCandidate; ErrArguments.
func Reply(resp *genai.GenerateContentResponse) (convo.Reply, error) {
	if resp == nil || len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		if resp != nil && resp.PromptFeedback != nil && resp.PromptFeedback.BlockReason != "" {
			return convo.Reply{}, fmt.Errorf("%w: prompt blocked: %s %s", ErrNoCandidate, resp.PromptFeedback.BlockReason, resp.PromptFeedback.BlockReasonMessage)
		}
		return convo.Reply{}, ErrNoCandidate
	}
	r := convo.Reply{Model: resp.ModelVersion}
	if u := resp.UsageMetadata; u != nil {
		usage := sessionstore.Usage{
			InputTokens:     int64(u.PromptTokenCount),
			OutputTokens:    int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
			CacheReadTokens: int64(u.CachedContentTokenCount),
		}
		if usage != (sessionstore.Usage{}) {
			r.Usage = &usage
		}
	}
	content := resp.Candidates[0].Content
	if content == nil {
		return r, nil
	}
	var text, reasoning strings.Builder
	for _, p := range content.Parts {
		switch {
		case p == nil:
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			c := sessionstore.ToolCall{CallID: fc.ID, Name: fc.Name}
			var args []byte
			if fc.Args != nil {
				var err error
				if args, err = json.Marshal(fc.Args); err != nil {
					return convo.Reply{}, fmt.Errorf("%w: call %q (%s): %v", ErrArguments, fc.ID, fc.Name, err)
				}
				c.Arguments = args
			}
			if c.CallID == "" {
				h := sha256.Sum256([]byte(resp.ResponseID + "\x00" + strconv.Itoa(len(r.ToolCalls)) + "\x00" + fc.Name + "\x00" + string(args)))
				c.CallID = DerivedIDPrefix + hex.EncodeToString(h[:8])
			}
			c.ProviderState = signature(p)
			r.ToolCalls = append(r.ToolCalls, c)
		case p.Thought:
			reasoning.WriteString(p.Text)
			r.ProviderState = append(r.ProviderState, signature(p)...)
		default:
			text.WriteString(p.Text)
			r.ProviderState = append(r.ProviderState, signature(p)...)
		}
	}
	r.Text, r.Reasoning = text.String(), reasoning.String()
	return r, nil
}
