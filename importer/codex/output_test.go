package codex

import (
	"encoding/json"
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
