package sessionstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// reviewMsg is an assistant message of model reporting u.
func reviewMsg(model string, u Usage) Event {
	return NewEvent(KindMessage, RoleAssistant, Message{Content: "answer", Model: model, Usage: &u})
}

// allScopes returns Usage of session over UsageSession, UsageBranch (the
// active path) and UsageTree.
func allScopes(t *testing.T, s *Store, session uuid.UUID) map[string]UsageTotals {
	t.Helper()
	out := map[string]UsageTotals{}
	for name, scope := range map[string]UsageScope{"session": {Kind: UsageSession}, "branch": {Kind: UsageBranch}, "tree": {Kind: UsageTree}} {
		u, err := s.Usage(context.Background(), session, scope)
		require.NoError(t, err, name)
		out[name] = u
	}
	return out
}

// listedUsage is the totals List reports for session.
func listedUsage(t *testing.T, s *Store, session uuid.UUID) *RecordedUsage {
	t.Helper()
	metas, err := s.List(context.Background())
	require.NoError(t, err)
	for _, m := range metas {
		if m.ID == session {
			return m.Usage
		}
	}
	require.Failf(t, "not listed", "session %s", session)
	return nil
}

// Token counts past what an int64 holds stay at math.MaxInt64 in every
// scope, in the recorded totals and in List, instead of wrapping around
// to a negative total.
func TestReviewUsageOverflowSaturates(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	top, err := s.Create(ctx, Meta{Model: "m"})
	require.NoError(t, err)
	sub, err := s.Create(ctx, Meta{Model: "m", ParentSession: top.ID})
	require.NoError(t, err)
	huge := Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64 - 1, CacheReadTokens: math.MaxInt64 / 2, CacheWriteTokens: 1}
	for _, id := range []uuid.UUID{top.ID, top.ID, sub.ID} {
		_, err := s.Append(ctx, id, reviewMsg("m", huge))
		require.NoError(t, err)
	}
	want := Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64 - 1, CacheWriteTokens: 2}
	tree := Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64, CacheWriteTokens: 3} // with the subagent's
	for name, u := range allScopes(t, s, top.ID) {
		w := want
		if name == "tree" {
			w = tree
		}
		assert.Equal(t, w, u.Usage, name)
		require.Len(t, u.ByModel, 1, name)
		assert.Equal(t, w, u.ByModel[0].Usage, name)
	}
	require.NoError(t, s.Close())
	s = openMem(t, m, Options{})
	rec := listedUsage(t, s, top.ID)
	require.NotNil(t, rec)
	assert.Equal(t, want, rec.Totals("m", nil).Usage, "the recorded totals")
	// A fold of the log (no recorded totals) gives the same.
	require.NoError(t, s.withHandle(ctx, top.ID, func(h *openSession) error {
		h.usage, h.meta.Usage = sessionUsage{}, nil
		return nil
	}))
	u, err := s.Usage(ctx, top.ID, UsageScope{Kind: UsageSession})
	require.NoError(t, err)
	assert.Equal(t, want, u.Usage, "folded")
	require.NoError(t, s.Close())
}

// A negative token count in a record counts as 0: totals never go
// negative, and a count of math.MinInt64, which the catalogue's line
// cannot hold, never reaches it (the catalogue, which then read as
// damaged, was rebuilt from every session.json at each open).
func TestReviewUsageNegativeCountsAsZero(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	meta, err := s.Create(ctx, Meta{Model: "m"})
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, reviewMsg("m", Usage{InputTokens: math.MinInt64, OutputTokens: -5, CacheReadTokens: 7}))
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, reviewMsg("m", Usage{InputTokens: 3}))
	require.NoError(t, err)
	want := Usage{InputTokens: 3, CacheReadTokens: 7}
	for name, u := range allScopes(t, s, meta.ID) {
		assert.Equal(t, want, u.Usage, name)
		assert.Equal(t, int64(2), u.Messages, name)
	}
	require.NoError(t, s.Close())

	catalogue := func() []byte {
		b, err := vfs.ReadFile(m, filepath.Join(memRoot, "catalogue.jsonl"))
		require.NoError(t, err)
		return b
	}
	s = openMem(t, m, Options{})
	rec := listedUsage(t, s, meta.ID)
	require.NoError(t, s.Close())
	require.NotNil(t, rec)
	assert.Equal(t, want, rec.Totals("m", nil).Usage)
	before := catalogue()
	s = openMem(t, m, Options{})
	_, err = s.List(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Equal(t, string(before), string(catalogue()), "an open and a List of an unchanged store do not rebuild the catalogue")
}

// writeMetaUsage rewrites the session.json of session id on m (closed)
// with edit applied to its recorded totals, with a valid checksum: a
// hostile or damaged file the store must not trust.
func writeMetaUsage(t *testing.T, m *vfs.MemFS, id uuid.UUID, edit func(*RecordedUsage)) {
	t.Helper()
	path := filepath.Join(memRoot, "sessions", id.String(), metaFile)
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	meta, format, err := decodeMeta(b, id, path)
	require.NoError(t, err)
	require.NotNil(t, meta.Usage)
	edit(meta.Usage)
	nb, err := encodeMeta(meta, format)
	require.NoError(t, err)
	writeMemFile(t, m, path, nb)
}

// A session.json whose usage member cannot be the store's (negative
// counts, a watermark of no events with totals, a negative number of
// events) is not trusted: Usage reads the log, whatever way the session
// opens (lazily, with its index, read-only), and Meta reports no totals.
func TestReviewUsageHostileMeta(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(u *RecordedUsage, evs []Event){
		"negative tokens at the current watermark": func(u *RecordedUsage, _ []Event) { u.Models[0].InputTokens = -1000 },
		"negative messages":                        func(u *RecordedUsage, _ []Event) { u.Models[0].Messages = -1 },
		"totals for no events":                     func(u *RecordedUsage, _ []Event) { u.Events, u.Through = 0, uuid.Nil },
		"negative events":                          func(u *RecordedUsage, _ []Event) { u.Events, u.Through = -3, uuid.Nil },
		"negative events at the last event":        func(u *RecordedUsage, evs []Event) { u.Events = -3 },
		"no events, a watermark":                   func(u *RecordedUsage, evs []Event) { u.Events = 0 },
		"an unknown watermark":                     func(u *RecordedUsage, _ []Event) { u.Through = uuid.New() },
		"a watermark at another position":          func(u *RecordedUsage, evs []Event) { u.Through, u.Events = evs[2].ID, 5 },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			m := vfs.NewMemFS()
			s := openMem(t, m, Options{})
			meta, err := s.Create(ctx, Meta{Model: "m"})
			require.NoError(t, err)
			var evs []Event
			var want int64
			for i := range 6 {
				ev, err := s.Append(ctx, meta.ID, reviewMsg("m", Usage{InputTokens: int64(i + 1)}))
				require.NoError(t, err)
				evs = append(evs, ev)
				want += int64(i + 1)
			}
			require.NoError(t, s.Close())
			writeMetaUsage(t, m, meta.ID, func(u *RecordedUsage) { edit(u, evs) })

			check := func(o Options, how string) {
				s := openMem(t, m, o)
				u, err := s.Usage(ctx, meta.ID, UsageScope{Kind: UsageSession})
				require.NoError(t, err)
				assert.Equal(t, want, u.InputTokens, how)
				assert.Equal(t, int64(6), u.Messages, how)
				require.NoError(t, s.Close())
			}
			check(Options{ReadOnly: true}, "read-only")
			check(Options{}, "lazy open")
			// Without index.jsonl the open reconciles (not lazy).
			writeMemFile(t, m, filepath.Join(memRoot, "sessions", meta.ID.String(), indexName), nil)
			check(Options{}, "open with the index")
		})
	}
	t.Run("decode", func(t *testing.T) {
		id := uuid.New()
		bad := Meta{ID: id, Usage: &RecordedUsage{Events: 1, Through: uuid.New(), Models: []ModelUsage{{Model: "m", Messages: 1, Usage: Usage{OutputTokens: -1}}}}}
		b, err := encodeMeta(bad, formatVersion)
		require.NoError(t, err)
		got, _, err := decodeMeta(b, id, "session.json")
		require.NoError(t, err, "the rest of session.json is read")
		assert.Nil(t, got.Usage, "totals the store cannot have written are dropped")
		good := bad
		good.Usage = &RecordedUsage{Events: 1, Through: bad.Usage.Through, Models: []ModelUsage{{Model: "m", Messages: 1, Usage: Usage{OutputTokens: 1}}}}
		b, err = encodeMeta(good, formatVersion)
		require.NoError(t, err)
		got, _, err = decodeMeta(b, id, "session.json")
		require.NoError(t, err)
		assert.Equal(t, good.Usage, got.Usage, "valid totals are kept")
	})
}

// Totals that do not fit in session.json beside the caller's metadata
// are left out once: a Flush or Close with nothing new writes no
// session.json (each wrote the whole file, up to 1 MiB, again).
func TestReviewUsageUnfitWrittenOnce(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	meta, err := s.Create(ctx, Meta{Model: "m", Labels: map[string]string{"big": strings.Repeat("x", maxMetaSize-2000)}})
	require.NoError(t, err)
	for i := range 40 {
		_, err := s.Append(ctx, meta.ID, reviewMsg(strings.Repeat("m", 60)+string(rune('a'+i%26))+string(rune('a'+i/26)), Usage{InputTokens: 1}))
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx, meta.ID))
	got, err := s.Meta(ctx, meta.ID)
	require.NoError(t, err)
	require.Nil(t, got.Usage, "the totals do not fit beside the labels")
	writes := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if vfs.Mutating(op) && strings.Contains(path, metaFile) {
			writes++
		}
		return nil
	})
	for range 3 {
		require.NoError(t, s.Flush(ctx, meta.ID))
	}
	require.NoError(t, s.CloseSession(ctx, meta.ID))
	m.SetFault(nil)
	assert.Zero(t, writes, "nothing changed since the Flush that left the totals out")
	u, err := s.Usage(ctx, meta.ID, UsageScope{Kind: UsageSession})
	require.NoError(t, err)
	assert.Equal(t, int64(40), u.InputTokens)
	// The next event moves the totals: they are tried again.
	_, err = s.Append(ctx, meta.ID, reviewMsg("m", Usage{InputTokens: 1}))
	require.NoError(t, err)
	writes = 0
	m.SetFault(func(op vfs.Op, path string) error {
		if vfs.Mutating(op) && strings.Contains(path, metaFile) {
			writes++
		}
		return nil
	})
	require.NoError(t, s.Flush(ctx, meta.ID))
	m.SetFault(nil)
	assert.NotZero(t, writes, "an append moved UpdatedAt and the totals")
	require.NoError(t, s.Close())
}

// The usage of a message is its members "model" and "usage", spelled
// exactly, read as encoding/json reads them (repeated members, null);
// other spellings and members of nested values do not count. Checked
// against usageOfReference, in every scope and after a fold of the log.
func TestReviewUsageMemberSpelling(t *testing.T) {
	ctx := context.Background()
	records := map[string]*eventUsage{
		`{"content":"a","Usage":{"input_tokens":5}}`:                                                                                           nil,
		`{"content":"a","\u0075sage":{"output_tokens":7},"usage":{"input_tokens":1}}`:                                                          {u: Usage{InputTokens: 1}},
		`{"content":"a","usage":{"input_tokens":8},"usage":{"output_tokens":9}}`:                                                               {u: Usage{InputTokens: 8, OutputTokens: 9}},
		`{"content":"a","usage":{"input_tokens":8},"usage":null}`:                                                                              nil,
		`{"content":"a","model":"z","usage":{"cache_read_tokens":10},"model":null}`:                                                            {model: "z", u: Usage{CacheReadTokens: 10}},
		`{"content":"a","model":"z","usage":{"input_tokens":3},"model":"y"}`:                                                                   {model: "y", u: Usage{InputTokens: 3}},
		`{"content":"\"usage\":{\"input_tokens\":100}","tool_calls":[{"call_id":"c","name":"n","arguments":{"usage":{"input_tokens":1000}}}]}`: nil,
		`{"content":"a","usage":{"input_tokens":"many"}}`:                                                                                      nil,
		`{"content":"a","model":7,"usage":{"input_tokens":4}}`:                                                                                 nil,
		`{"content":"a backslash\\","usage":{"input_tokens":2}}`:                                                                               {u: Usage{InputTokens: 2}},
		`{"content":"a","usage":{"input_tokens":-4,"output_tokens":4}}`:                                                                        {u: Usage{OutputTokens: 4}},
	}
	s, _ := apiNewStore(t, nil)
	meta, err := s.Create(ctx, Meta{Model: "session-model"})
	require.NoError(t, err)
	var want usageTally
	for r, u := range records {
		assert.Equal(t, u, usageOfReference([]byte(r)), "the reference agrees: %s", r)
		assert.Equal(t, u, usageOf(KindMessage, []byte(r)), "%s", r)
		_, err := s.Append(ctx, meta.ID, Event{Kind: KindMessage, Role: RoleAssistant, Record: json.RawMessage(r)})
		require.NoError(t, err)
		want.add(u)
	}
	wantTotals := want.totals("session-model", nil)
	for name, got := range allScopes(t, s, meta.ID) {
		assert.Equal(t, wantTotals.ByModel, got.ByModel, name)
	}
	require.NoError(t, s.withHandle(ctx, meta.ID, func(h *openSession) error {
		h.usage, h.meta.Usage = sessionUsage{}, nil
		return nil
	}))
	got, err := s.Usage(ctx, meta.ID, UsageScope{Kind: UsageSession})
	require.NoError(t, err)
	assert.Equal(t, wantTotals.ByModel, got.ByModel, "folded")
}

// usageOfReference is usageOf written another way: encoding/json's
// tokenizer walks the record's top-level object, and the values of the
// members whose name is written exactly "usage" and "model" are decoded
// in order into one Message's fields; negative counts count as 0.
func usageOfReference(rec []byte) *eventUsage {
	dec := json.NewDecoder(bytes.NewReader(rec))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var m Message
	for dec.More() {
		from := dec.InputOffset()
		if _, err := dec.Token(); err != nil {
			return nil
		}
		name := strings.TrimLeft(string(rec[from:dec.InputOffset()]), " \t\r\n,")
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil
		}
		switch name {
		case `"usage"`:
			if json.Unmarshal(val, &m.Usage) != nil {
				return nil
			}
		case `"model"`:
			if json.Unmarshal(val, &m.Model) != nil {
				return nil
			}
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') || m.Usage == nil {
		return nil
	}
	u := *m.Usage
	return &eventUsage{model: m.Model, u: Usage{InputTokens: max(u.InputTokens, 0), OutputTokens: max(u.OutputTokens, 0),
		CacheReadTokens: max(u.CacheReadTokens, 0), CacheWriteTokens: max(u.CacheWriteTokens, 0)}}
}

// FuzzUsageOf checks that usageOf, which skips all but a message's model
// and usage members, finds what encoding/json's reading finds
// (usageOfReference), for every record that is JSON (the store appends
// no other), and never panics on other bytes.
func FuzzUsageOf(f *testing.F) {
	for _, s := range []string{
		`{"content":"a","model":"m","usage":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4}}`,
		`{"content":"say \"usage\": {}\\","Usage":{"Input_Tokens":5}}`,
		`{"usage":{"input_tokens":8},"usage":{"output_tokens":9},"model":"a","model":null}`,
		`{"tool_calls":[{"arguments":{"usage":{"input_tokens":1}}}],"usage":null}`,
		`{"u\u0073age":{"input_tokens":-3,"output_tokens":1e2}}`,
		`{"usage":{"input_tokens":1.5}}`,
		`{"model":7,"usage":{"input_tokens":1}}`,
		` { "usage" : { "input_tokens" : 2 } , "x" : [ 1 , "]" , { } ] } `,
		`{"uſage":{"input_tokens":4}}`,
		`[{"usage":{"input_tokens":1}}]`,
		`{"usage":{"input_tokens":1}`,
		`{"a":"\\\\\"","usage":{"input_tokens":2}}`,
		`{"content":"ends with a backslash\\","usage":{"input_tokens":2}}`,
		`{}`,
		`"usage"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		got := usageOf(KindMessage, rec)
		if !json.Valid(rec) {
			return // no panic, no read past rec: that is all
		}
		assert.Equal(t, usageOfReference(rec), got, "%s", rec)
		assert.Nil(t, usageOf(KindToolResult, rec), "only messages report usage")
	})
}

// BenchmarkUsageOf measures the append's reading of a message's usage
// (usageOf) against decoding the whole record as the first version did
// (json.Unmarshal into a Message's model and usage), side by side:
// ratio-vs-decode is usageOf's time over the decode's, for a short and a
// long answer, with and without usage.
func BenchmarkUsageOf(b *testing.B) {
	for _, n := range []int{300, 4 << 10, 64 << 10} {
		msg := Message{Content: strings.Repeat("a \"quoted\" <word>\n", n/20), Model: "model",
			Usage: &Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 9000}}
		rec, err := json.Marshal(msg)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("%dB", len(rec)), func(b *testing.B) {
			require.Equal(b, usageOfReference(rec), usageOf(KindMessage, rec))
			b.SetBytes(int64(len(rec)))
			t0 := time.Now()
			for range b.N {
				usageOf(KindMessage, rec)
			}
			got := time.Since(t0)
			t0 = time.Now()
			for range b.N {
				var m struct {
					Model string `json:"model"`
					Usage *Usage `json:"usage"`
				}
				_ = json.Unmarshal(rec, &m)
			}
			ref := time.Since(t0)
			b.ReportMetric(float64(got)/float64(b.N), "usageOf-ns/op")
			b.ReportMetric(float64(ref)/float64(b.N), "decode-ns/op")
			b.ReportMetric(float64(got)/float64(ref), "ratio-vs-decode")
		})
	}
}
