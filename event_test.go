package sessionstore

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// apiMaxRecord is the MaxRecordSize of the input tests.
const apiMaxRecord = 64

// apiRecordOfSize returns a compact JSON string record of exactly n bytes.
func apiRecordOfSize(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("r", n-2) + `"`)
}

func TestAPIAppendRejectsBadInput(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	valid := json.RawMessage(`{"content":"x"}`)
	cases := []struct {
		name string
		ev   Event
		want []error // beyond ErrInvalidEvent; nil means not ErrRecordTooLarge
	}{
		{"unknown kind", Event{Kind: "bogus", Role: RoleUser, Record: valid}, nil},
		{"empty kind", Event{Role: RoleUser, Record: valid}, nil},
		{"kind in wrong case", Event{Kind: "Message", Role: RoleUser, Record: valid}, nil},
		{"unknown role", Event{Kind: KindMessage, Role: "system", Record: valid}, nil},
		{"role in wrong case", Event{Kind: KindMessage, Role: "User", Record: valid}, nil},
		{"truncated JSON", Event{Kind: KindCustom, Record: json.RawMessage(`{"a":`)}, nil},
		{"single quotes", Event{Kind: KindCustom, Record: json.RawMessage(`{'a':1}`)}, nil},
		{"two values", Event{Kind: KindCustom, Record: json.RawMessage(`{} {}`)}, nil},
		{"bare word", Event{Kind: KindCustom, Record: json.RawMessage(`hello`)}, nil},
		{"raw newline inside a string", Event{Kind: KindCustom, Record: json.RawMessage("\"a\nb\"")}, nil},
		{"whitespace only", Event{Kind: KindCustom, Record: json.RawMessage(" \n ")}, nil},
		{"record over MaxRecordSize", Event{Kind: KindCustom, Record: apiRecordOfSize(apiMaxRecord + 1)}, []error{ErrRecordTooLarge}},
		{"indented record over MaxRecordSize", Event{Kind: KindCustom, Record: json.RawMessage(" [\n" + strings.Repeat(" 1,\n", 40) + " 1\n]\n")}, []error{ErrRecordTooLarge}},
		{"helper record over MaxRecordSize", UserText(strings.Repeat("u", apiMaxRecord)), []error{ErrRecordTooLarge}},
		{"invalid JSON over MaxRecordSize", Event{Kind: KindCustom, Record: json.RawMessage(strings.Repeat("{", apiMaxRecord+1))}, []error{}},
		{"caller-set ID of version 4", Event{ID: uuid.New(), Kind: KindCustom, Record: valid}, nil},
		{"caller-set ID of version 7, wrong variant", Event{ID: wrongVariantV7(), Kind: KindCustom, Record: valid}, nil},
		{"caller-set ParentID", Event{ParentID: uuid.New(), Kind: KindCustom, Record: valid}, nil},
		{"caller-set BranchFrom", Event{BranchFrom: uuid.New(), Kind: KindCustom, Record: valid}, nil},
		{"caller-set Time", Event{Time: time.Now(), Kind: KindCustom, Record: valid}, nil},
		{"helper with a channel", NewEvent(KindCustom, RoleNone, make(chan int)), nil},
		{"helper with a func", NewEvent(KindCustom, RoleNone, map[string]any{"f": func() {}}), nil},
		{"helper with NaN", NewEvent(KindCustom, RoleNone, math.NaN()), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, dir := apiNewStore(t, &Options{MaxRecordSize: apiMaxRecord})
			id := apiNewSession(t, s)
			first := apiAppend(t, s, id, UserText("first"))
			sdir := apiSessionDir(dir, id)
			files := apiFiles(t, sdir)
			tree := apiTree(t, s, id)

			got, err := s.Append(ctx, id, tc.ev)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidEvent)
			for _, want := range tc.want {
				assert.ErrorIs(t, err, want)
			}
			if tc.want == nil {
				assert.NotErrorIs(t, err, ErrRecordTooLarge)
			}
			assert.Equal(t, Event{}, got)

			// Nothing was written.
			assert.Equal(t, files, apiFiles(t, sdir), "files of the session changed")
			apiSameNodes(t, tree, apiTree(t, s, id))
			assert.Equal(t, first.ID, apiHead(t, s, id))
			// Bad input to an unknown session is still bad input, and
			// creates nothing.
			_, err = s.Append(ctx, uuid.New(), tc.ev)
			assert.Error(t, err)
			// The session goes on normally, also after a reopen.
			next := apiAppend(t, s, id, UserText("next"))
			assert.Equal(t, first.ID, next.ParentID)
			require.NoError(t, s.Close())
			apiSameEvents(t, []Event{first, next}, apiLoad(t, apiOpen(t, dir, &Options{MaxRecordSize: apiMaxRecord}), id))
		})
	}
}

func TestAPIRecordSizeLimit(t *testing.T) {
	// MaxRecordSize counts the bytes of the record's compact JSON.
	cases := []struct {
		name    string
		record  json.RawMessage
		compact int
		ok      bool
	}{
		{"exactly at the limit", apiRecordOfSize(apiMaxRecord), apiMaxRecord, true},
		{"one over the limit", apiRecordOfSize(apiMaxRecord + 1), apiMaxRecord + 1, false},
		{"at the limit with outer whitespace", json.RawMessage("\n\t " + string(apiRecordOfSize(apiMaxRecord)) + " \n"), apiMaxRecord, true},
		{"small once compact, large as given", json.RawMessage("[1," + strings.Repeat(" ", 3*apiMaxRecord) + "2]"), 5, true},
		{"indented, at the limit once compact", json.RawMessage("{\n    \"k\": " + string(apiRecordOfSize(apiMaxRecord-6)) + "\n}\n"), apiMaxRecord, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.compact, len(apiCompact(t, string(tc.record))))
			s, _ := apiNewStore(t, &Options{MaxRecordSize: apiMaxRecord})
			id := apiNewSession(t, s)
			ev, err := s.Append(t.Context(), id, Event{Kind: KindCustom, Record: tc.record})
			if !tc.ok {
				assert.ErrorIs(t, err, ErrRecordTooLarge)
				assert.ErrorIs(t, err, ErrInvalidEvent)
				assert.Empty(t, apiTree(t, s, id))
				return
			}
			require.NoError(t, err)
			assert.Len(t, ev.Record, tc.compact)
			nodes := apiTree(t, s, id)
			require.Len(t, nodes, 1)
			assert.Equal(t, int64(tc.compact), nodes[0].Size)
		})
	}
}

func TestAPITypedHelpers(t *testing.T) {
	cases := []struct {
		name string
		ev   Event
		kind Kind
		role Role
		// check decodes the stored event with its typed accessor.
		check func(t *testing.T, ev Event)
	}{
		{
			name: "UserMessage", ev: UserText("hello\nworld \"quoted\""), kind: KindMessage, role: RoleUser,
			check: func(t *testing.T, ev Event) {
				m, err := ev.Message()
				require.NoError(t, err)
				assert.Equal(t, Message{Content: "hello\nworld \"quoted\""}, m)
			},
		},
		{
			name: "AssistantMessage with Usage",
			ev: AssistantMessage(Message{Content: "answer", Reasoning: "because", Model: "model-x",
				Usage: &Usage{InputTokens: 812, OutputTokens: 40, CacheReadTokens: 7, CacheWriteTokens: 3}}),
			kind: KindMessage, role: RoleAssistant,
			check: func(t *testing.T, ev Event) {
				m, err := ev.Message()
				require.NoError(t, err)
				assert.Equal(t, Message{Content: "answer", Reasoning: "because", Model: "model-x",
					Usage: &Usage{InputTokens: 812, OutputTokens: 40, CacheReadTokens: 7, CacheWriteTokens: 3}}, m)
				assert.JSONEq(t, `{"content":"answer","reasoning":"because","model":"model-x","usage":{"input_tokens":812,"output_tokens":40,"cache_read_tokens":7,"cache_write_tokens":3}}`, string(ev.Record))
			},
		},
		{
			name: "AssistantMessage without optional fields", ev: AssistantText("short"),
			kind: KindMessage, role: RoleAssistant,
			check: func(t *testing.T, ev Event) {
				assert.Equal(t, `{"content":"short"}`, string(ev.Record))
				m, err := ev.Message()
				require.NoError(t, err)
				assert.Nil(t, m.Usage)
			},
		},
		{
			name: "ToolCallEvent with Arguments",
			ev:   ToolCallEvent(ToolCall{CallID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{ "path": "a.go", "lines": [1, 2] }`)}),
			kind: KindToolCall, role: RoleAssistant,
			check: func(t *testing.T, ev Event) {
				c, err := ev.ToolCall()
				require.NoError(t, err)
				assert.Equal(t, "call_1", c.CallID)
				assert.Equal(t, "read_file", c.Name)
				assert.Equal(t, `{"path":"a.go","lines":[1,2]}`, string(c.Arguments))
			},
		},
		{
			name: "ToolResultEvent with IsError", ev: ToolResultEvent(ToolResult{CallID: "call_1", Output: "permission denied", IsError: true}),
			kind: KindToolResult, role: RoleTool,
			check: func(t *testing.T, ev Event) {
				r, err := ev.ToolResult()
				require.NoError(t, err)
				assert.Equal(t, ToolResult{CallID: "call_1", Output: "permission denied", IsError: true}, r)
				assert.Contains(t, string(ev.Record), `"is_error":true`)
			},
		},
		{
			name: "ToolResultEvent without IsError", ev: ToolResultEvent(ToolResult{CallID: "call_2", Output: "ok"}),
			kind: KindToolResult, role: RoleTool,
			check: func(t *testing.T, ev Event) {
				r, err := ev.ToolResult()
				require.NoError(t, err)
				assert.Equal(t, ToolResult{CallID: "call_2", Output: "ok"}, r)
				assert.NotContains(t, string(ev.Record), "is_error")
			},
		},
		{
			// Provider state comes back byte for byte: JSON with white
			// space the record's compaction would remove, and bytes that
			// are not UTF-8; and it is never the preview.
			name: "AssistantMessage with ProviderState",
			ev: AssistantMessage(Message{Content: "", ToolCalls: []ToolCall{{CallID: "c1", Name: "ls",
				ProviderState: []ProviderState{{Provider: "gemini", Type: "thought_signature", Data: []byte{0xff, 0x00, 0xfe, 'x'}}}}},
				ProviderState: []ProviderState{{Provider: "openai", Type: "reasoning", Data: []byte(`{ "type": "reasoning",  "encrypted_content": "gAAA" }`)}}}),
			kind: KindMessage, role: RoleAssistant,
			check: func(t *testing.T, ev Event) {
				m, err := ev.Message()
				require.NoError(t, err)
				require.Len(t, m.ProviderState, 1)
				assert.Equal(t, ProviderState{Provider: "openai", Type: "reasoning", Data: []byte(`{ "type": "reasoning",  "encrypted_content": "gAAA" }`)}, m.ProviderState[0])
				require.Len(t, m.ToolCalls, 1)
				assert.Equal(t, []ProviderState{{Provider: "gemini", Type: "thought_signature", Data: []byte{0xff, 0x00, 0xfe, 'x'}}}, m.ToolCalls[0].ProviderState)
			},
		},
		{
			name: "ToolCallEvent with ProviderState",
			ev: ToolCallEvent(ToolCall{CallID: "c1", Name: "ls",
				ProviderState: []ProviderState{{Provider: "gemini", Type: "thought_signature", Data: []byte("\n\t sig")}}}),
			kind: KindToolCall, role: RoleAssistant,
			check: func(t *testing.T, ev Event) {
				c, err := ev.ToolCall()
				require.NoError(t, err)
				assert.Equal(t, []ProviderState{{Provider: "gemini", Type: "thought_signature", Data: []byte("\n\t sig")}}, c.ProviderState)
			},
		},
	}
	accessors := map[Kind]func(Event) error{
		KindMessage:    func(ev Event) error { _, err := ev.Message(); return err },
		KindToolCall:   func(ev Event) error { _, err := ev.ToolCall(); return err },
		KindToolResult: func(ev Event) error { _, err := ev.ToolResult(); return err },
	}

	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	stored := make([]Event, len(cases))
	for i, tc := range cases {
		assert.Equal(t, tc.kind, tc.ev.Kind, tc.name)
		assert.Equal(t, tc.role, tc.ev.Role, tc.name)
		stored[i] = apiAppend(t, s, id, tc.ev)
	}
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	loaded := apiLoad(t, s2, id)
	require.Len(t, loaded, len(cases))
	nodes, err := s2.Tree(t.Context(), id)
	require.NoError(t, err)
	for _, n := range nodes {
		assert.NotContains(t, n.Preview, "gAAA", "provider state is never a preview")
		assert.NotContains(t, n.Preview, "provider_state")
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			byID, err := s2.Event(t.Context(), id, stored[i].ID)
			require.NoError(t, err)
			for src, ev := range map[string]Event{"helper": tc.ev, "Append": stored[i], "Load": loaded[i], "Event": byID} {
				t.Run(src, func(t *testing.T) {
					assert.Equal(t, tc.kind, ev.Kind)
					assert.Equal(t, tc.role, ev.Role)
					tc.check(t, ev)
					for kind, accessor := range accessors {
						if kind == tc.kind {
							assert.NoError(t, accessor(ev))
						} else {
							assert.ErrorIs(t, accessor(ev), ErrInvalidEvent, "accessor of %s on a %s", kind, tc.kind)
						}
					}
				})
			}
		})
	}

	// Kinds without a typed accessor are refused by all three.
	for _, kind := range []Kind{KindCompaction, KindBranchSummary, KindCustom} {
		ev := Event{Kind: kind, Record: json.RawMessage(`{"content":"x","call_id":"c"}`)}
		for _, accessor := range accessors {
			assert.ErrorIs(t, accessor(ev), ErrInvalidEvent, "accessor on a %s", kind)
		}
	}
	// Decode reports a record that does not fit.
	var n int
	assert.Error(t, stored[0].Decode(&n))
}

// TestAPINilRecord: a custom event may have no record (a marker), stored
// as null; every other kind has a record of its own shape, so one without
// (nil, empty or null) is refused with ErrInvalidEvent and nothing is
// written.
func TestAPINilRecord(t *testing.T) {
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	for _, k := range []Kind{KindMessage, KindToolCall, KindToolResult, KindCompaction, KindBranchSummary} {
		for _, rec := range []json.RawMessage{nil, {}, json.RawMessage(` null `)} {
			_, err := s.Append(t.Context(), id, Event{Kind: k, Role: RoleUser, Record: rec})
			assert.ErrorIs(t, err, ErrInvalidEvent, "%s with record %q", k, rec)
			assert.ErrorContains(t, err, "needs a record")
		}
	}
	assert.Empty(t, apiTree(t, s, id), "nothing was written")
	cases := []Event{
		{Kind: KindCustom},
		{Kind: KindCustom, Record: json.RawMessage{}},
		{Kind: KindCustom, Role: RoleUser, Record: json.RawMessage(`null`)},
	}
	var stored []Event
	for _, ev := range cases {
		out := apiAppend(t, s, id, ev)
		assert.Equal(t, "null", string(out.Record))
		stored = append(stored, out)
	}
	for _, n := range apiTree(t, s, id) {
		assert.Equal(t, int64(len("null")), n.Size)
	}
	require.NoError(t, s.Close())
	loaded := apiLoad(t, apiOpen(t, dir, nil), id)
	apiSameEvents(t, stored, loaded)
	for _, ev := range loaded {
		assert.Equal(t, "null", string(ev.Record))
		var v any = "not nil"
		require.NoError(t, ev.Decode(&v))
		assert.Nil(t, v)
	}
}

func TestAPIEveryKindAndRole(t *testing.T) {
	// The kind and role sets are closed, and every member of each is
	// accepted with every member of the other and read back unchanged.
	kinds := []Kind{KindMessage, KindToolCall, KindToolResult, KindCompaction, KindBranchSummary, KindCustom}
	roles := []Role{RoleNone, RoleUser, RoleAssistant, RoleTool}
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	var stored []Event
	for _, k := range kinds {
		for _, r := range roles {
			stored = append(stored, apiAppend(t, s, id, Event{Kind: k, Role: r, Record: json.RawMessage(`{"k":"` + string(k) + `","r":"` + string(r) + `"}`)}))
		}
	}
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	apiSameEvents(t, stored, apiLoad(t, s2, id))
	nodes := apiTree(t, s2, id)
	require.Len(t, nodes, len(stored))
	for i, n := range nodes {
		assert.Equal(t, stored[i].Kind, n.Kind)
		assert.Equal(t, stored[i].Role, n.Role)
	}
}

// TestEventJSON: an Event encodes with the member names of its chunk line
// and decodes back to the same event; an unresolved blob event says
// "record":null and keeps its digest.
func TestEventJSON(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{BlobThreshold: 64})
	defer s.Close()
	evs := appendN(t, s, id, 2)
	require.NoError(t, s.Branch(ctx, id, evs[0].ID))
	branched, err := s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "call_1", Output: strings.Repeat("output ", 20)}))
	require.NoError(t, err)
	require.NotEmpty(t, branched.Digest, "a blob")
	lazy, err := s.Event(ctx, id, branched.ID)
	require.NoError(t, err)
	require.Nil(t, lazy.Record)

	// The chunk line of the branched event, for its member names.
	b, err := vfs.ReadFile(m, newestChunk(t, m, id))
	require.NoError(t, err)
	var line string
	for l := range strings.Lines(string(b)) {
		if strings.Contains(l, branched.ID.String()) {
			line = l
		}
	}
	require.NotEmpty(t, line)

	for _, ev := range []Event{evs[0], evs[1], branched, lazy} {
		enc, err := json.Marshal(ev)
		require.NoError(t, err)
		var members map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(enc, &members))
		for _, name := range []string{"id", "parent_id", "kind", "timestamp", "record", "size"} {
			assert.Contains(t, members, name, "%s", enc)
		}
		assert.Equal(t, ev.BranchFrom != uuid.Nil, members["branch_from"] != nil, "%s", enc)
		assert.Equal(t, ev.Digest != "", members["digest"] != nil, "%s", enc)
		var back Event
		require.NoError(t, json.Unmarshal(enc, &back))
		assert.True(t, ev.Time.Equal(back.Time))
		back.Time = ev.Time
		if ev.Record == nil {
			assert.JSONEq(t, "null", string(back.Record))
			back.Record = nil
		}
		assert.Equal(t, ev, back)
	}
	enc, err := json.Marshal(branched)
	require.NoError(t, err)
	for _, name := range []string{`"id":`, `"parent_id":`, `"branch_from":`, `"kind":`, `"role":`, `"timestamp":`, `"digest":`, `"size":`} {
		assert.Contains(t, line, name, "the chunk line has the member")
		assert.Contains(t, string(enc), name, "the event's JSON has the member")
	}
}

// TestMessageConstructors: XMessage takes a whole Message and XText its
// content, for both roles, with the same record shape.
func TestMessageConstructors(t *testing.T) {
	m := Message{Content: "hi", Reasoning: "why", Model: "m", Usage: &Usage{InputTokens: 3}}
	for _, tc := range []struct {
		role       Role
		full, text Event
	}{
		{RoleUser, UserMessage(m), UserText("hi")},
		{RoleAssistant, AssistantMessage(m), AssistantText("hi")},
	} {
		assert.Equal(t, KindMessage, tc.full.Kind)
		assert.Equal(t, tc.role, tc.full.Role)
		assert.Equal(t, tc.role, tc.text.Role)
		got, err := tc.full.Message()
		require.NoError(t, err)
		assert.Equal(t, m, got)
		got, err = tc.text.Message()
		require.NoError(t, err)
		assert.Equal(t, Message{Content: "hi"}, got)
	}
	assert.Equal(t, "cdef0123", ShortID(uuid.MustParse("01234567-0123-7000-89ab-cdef01234567")))
}
