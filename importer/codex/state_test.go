package codex

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reasoning item with encrypted_content is provider state for the tool
// call or assistant message it preceded, custom items between; when the
// turn ends first it stays on the reasoning's own event. Data is the
// item as the rollout holds it, and never text.
func TestReasoningItemsAreProviderState(t *testing.T) {
	r1 := `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan"}],"content":null,"encrypted_content":"gAAAAB1..."}`
	r2 := `{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAAAB2..."}`
	plain := `{"type":"reasoning","id":"rs_3","summary":[{"type":"summary_text","text":"No state"}]}`
	call := `{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}`
	answer := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}`
	search := `{"type":"web_search_call","status":"completed","action":{"type":"search","query":"q"}}`
	user := `{"type":"message","role":"user","content":[{"type":"input_text","text":"Next."}]}`
	cases := []struct {
		name  string
		items []string
		// state is, by item index, the reasoning items (by index) whose
		// state the item's event holds.
		state map[int][]int
	}{
		{"before a call", []string{r1, call}, map[int][]int{1: {0}}},
		{"before a message", []string{r1, answer}, map[int][]int{1: {0}}},
		{"two before a call", []string{r1, r2, call}, map[int][]int{2: {0, 1}}},
		{"a custom item between", []string{r1, search, answer}, map[int][]int{2: {0}}},
		{"the turn ends first", []string{r1, user, answer}, map[int][]int{0: {0}}},
		{"at the end", []string{call, r1}, map[int][]int{1: {1}}},
		{"without encrypted content", []string{plain, call}, map[int][]int{}},
		{"before a compaction", []string{r1, `compacted`, answer}, map[int][]int{0: {0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := meta
			for _, it := range tc.items {
				if it == "compacted" {
					data += `{"timestamp":"2025-01-01T00:00:01Z","type":"compacted","payload":{"message":"s"}}` + "\n"
					continue
				}
				data += itemLine(it)
			}
			s, errs, _, err := read(strings.NewReader(data), "r.jsonl", "r.jsonl")
			require.NoError(t, err)
			require.Empty(t, errs)
			// The event of item i: events after the session_meta, in order
			// (a compaction's rebuilt history adds events after it).
			byItem := map[int]sessionstore.Event{}
			k := 1
			for i, it := range tc.items {
				byItem[i] = s.Events[k]
				k++
				if it == "compacted" {
					k++ // the rebuilt summary message
				}
			}
			for i, it := range tc.items {
				ev := byItem[i]
				var got []sessionstore.ProviderState
				switch ev.Kind {
				case sessionstore.KindToolCall:
					c, err := ev.ToolCall()
					require.NoError(t, err)
					got = c.ProviderState
				case sessionstore.KindMessage:
					m, err := ev.Message()
					require.NoError(t, err)
					got = m.ProviderState
					assert.NotContains(t, m.Content+m.Reasoning, "gAAAA", "state is never text")
				}
				var want []sessionstore.ProviderState
				for _, j := range tc.state[i] {
					want = append(want, sessionstore.ProviderState{Provider: "openai", Type: "reasoning", Data: []byte(tc.items[j])})
				}
				assert.Equal(t, want, got, "item %d: %s", i, it)
			}
		})
	}
}

// The state is stored and loaded byte for byte.
func TestReasoningStateStored(t *testing.T) {
	path := filepath.Join("testdata", "basic.jsonl")
	st := openStore(t)
	_, err := Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	s, _, err := Read(path)
	require.NoError(t, err)
	evs, err := st.Load(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	found := 0
	for _, ev := range evs {
		if ev.Kind != sessionstore.KindToolCall {
			continue
		}
		c, err := ev.ToolCall()
		require.NoError(t, err)
		for _, ps := range c.ProviderState {
			found++
			assert.Equal(t, `{"type":"reasoning","summary":[{"type":"summary_text","text":"**Running the build**"}],"content":null,"encrypted_content":"gAAAAB..."}`, string(ps.Data))
		}
	}
	assert.Equal(t, 1, found)
}

// A model sees a compaction's summary once: convo renders the compaction,
// and the user message that repeats it in Codex's history is a custom
// event, which it leaves out; Load still holds that item in its place
// (TestLoadIsCodexResumeHistory).
func TestCompactionSummaryOnceForModel(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "legacy.jsonl")
	require.NoError(t, os.WriteFile(legacy, []byte(meta+userLine("Split parse().")+`{"timestamp":"2025-01-01T00:00:02Z","type":"compacted","payload":{"message":"parse() is split in two."}}`+"\n"+userLine("Now test it.")), 0o644))
	for _, path := range []string{filepath.Join("testdata", "compacted.jsonl"), legacy} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t)
			_, err := Import(ctx, st, []string{path}, nil)
			require.NoError(t, err)
			s, _, err := Read(path)
			require.NoError(t, err)
			evs, err := st.Load(ctx, s.Meta.ID)
			require.NoError(t, err)
			c, err := evs[0].Compaction()
			require.NoError(t, err)
			require.NotEmpty(t, c.Summary.Text)
			built, err := convo.Build(evs, nil)
			require.NoError(t, err)
			n := 0
			for _, m := range built.Messages {
				n += strings.Count(m.Text, c.Summary.Text)
			}
			assert.Equal(t, 1, n, "the summary once in what the model is sent")
		})
	}
}
