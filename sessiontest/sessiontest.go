// Package sessiontest holds helpers for examples and tests of code that
// uses sessionstore, as net/http/httptest does for net/http: nothing in it
// calls a model or is meant for production.
package sessiontest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sessionstore/sessionstore"
)

// Summarizer is a deterministic sessionstore.Summarizer: it records the
// first user message (and the goals of a compaction it summarizes again)
// as the goals and counts the events by kind, without calling a model.
type Summarizer struct{}

// Summarize implements sessionstore.Summarizer.
func (Summarizer) Summarize(_ context.Context, events []sessionstore.Event) (sessionstore.Summary, error) {
	var sum sessionstore.Summary
	counts := map[sessionstore.Kind]int{}
	for _, ev := range events {
		counts[ev.Kind]++
		if ev.Kind == sessionstore.KindMessage && ev.Role == sessionstore.RoleUser && len(sum.Goals) == 0 {
			if m, err := ev.Message(); err == nil {
				sum.Goals = append(sum.Goals, m.Content)
			}
		}
		if ev.Kind == sessionstore.KindCompaction {
			if c, err := ev.Compaction(); err == nil {
				sum.Goals = append(sum.Goals, c.Summary.Goals...)
			}
		}
	}
	b, err := json.Marshal(counts)
	if err != nil {
		return sessionstore.Summary{}, err
	}
	sum.Text = fmt.Sprintf("%d events summarized: %s", len(events), b)
	return sum, nil
}
