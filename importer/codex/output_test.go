package codex

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The shapes of a tool output, and content nested deeper than Codex
// writes it, which output keeps as JSON instead of unwrapping level by
// level (a walk whose depth the input decides).
func TestOutputShapes(t *testing.T) {
	deep := strings.Repeat(`{"content":`, 10_000) + `"x"` + strings.Repeat(`}`, 10_000)
	cases := []struct {
		name, raw, text string
		isErr           bool
	}{
		{"string", `"done"`, "done", false},
		{"items", `[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]`, "a\nb", false},
		{"object", `{"content":"boom","success":false}`, "boom", true},
		{"object of items", `{"content":[{"type":"input_text","text":"ok"}],"success":true}`, "ok", false},
		{"nested within the bound", `{"content":{"content":"x"},"success":false}`, "x", true},
		{"no content", `{"success":false}`, "", true},
		{"a number", `7`, "", false},
		{"deeper than the bound", deep, strings.Repeat(`{"content":`, 10_000-maxOutputDepth) + `"x"` + strings.Repeat(`}`, 10_000-maxOutputDepth), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, isErr := output(json.RawMessage(tc.raw))
			assert.Equal(t, tc.text, text)
			assert.Equal(t, tc.isErr, isErr)
		})
	}
}

// rollbacks is a rollout of n user turns, then n rollbacks of one turn
// each, each dropping the newest turn left.
func rollbacks(n int) string {
	var b strings.Builder
	b.WriteString(meta)
	for i := range n {
		b.WriteString(userLine(fmt.Sprint("turn ", i)))
	}
	for range n {
		b.WriteString(`{"timestamp":"2025-01-01T00:00:02Z","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}` + "\n")
	}
	return b.String()
}

// BenchmarkReadRollbacks reads rollouts of growing numbers of rollbacks
// side by side: the time per line stays flat as the rollout grows.
func BenchmarkReadRollbacks(b *testing.B) {
	for _, n := range []int{5_000, 10_000, 20_000} {
		data := rollbacks(n)
		b.Run(fmt.Sprint("lines=", 2*n+1), func(b *testing.B) {
			for b.Loop() {
				if _, _, _, err := read(strings.NewReader(data), "r.jsonl", "r.jsonl"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n+1), "ns/line")
		})
	}
}
