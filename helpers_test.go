package sessionstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// fakeClock returns a clock that starts at start and advances by step on
// every call, and an id source that makes valid, increasing UUIDv7 values
// from a counter: together they make a workload's files reproducible.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
	seq  uint64
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 8, 25, 17, 21, 22, 454897183, time.UTC), step: 1500 * time.Millisecond}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *fakeClock) NewID() (uuid.UUID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	var id uuid.UUID
	ms := uint64(c.now.UnixMilli())
	id[0], id[1], id[2], id[3], id[4], id[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	binary.BigEndian.PutUint64(id[8:], c.seq)
	id[6] = 0x70 | byte(c.seq>>56)&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id, nil
}

// deterministic returns options whose clock and ids come from a fake clock.
func deterministic(o Options) Options {
	c := newFakeClock()
	o.now = c.Now
	o.newID = c.NewID
	return o
}

// testSize returns the size of a long test loop, read from the
// environment variable name: def when it is unset or empty, the number it
// holds (a positive integer), or all when it says "all" (the loop's full
// size: every crash point, every byte; all <= 0 means the loop has no
// full size, and "all" is refused). Anything else fails the test. The
// loops sized this way run a sample by default, so that go test ./...
// stays quick; .ci/run asks for their full sizes in a separate step.
func testSize(t testing.TB, name string, def, all int) int {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	switch {
	case v == "":
		return def
	case strings.EqualFold(v, "all") && all > 0:
		return all
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		want := "a positive number"
		if all > 0 {
			want += ` or "all"`
		}
		t.Fatalf("%s=%q: want %s", name, v, want)
	}
	return n
}

// reached waits for a test's gate to signal on ch, and fails the test if
// it has not within half a minute: a safety net that turns a gate never
// reached (a sync that never runs, say) into a failure naming what, not a
// hang until -timeout. It decides no outcome: the gate is reached at once
// when the code works.
func reached(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not reached in 30s", what)
	}
}

// testSummarizer is sessiontest.Summarizer for this package's own tests,
// which cannot import a package that imports this one.
type testSummarizer struct{}

func (testSummarizer) Summarize(_ context.Context, events []Event) (Summary, error) {
	var sum Summary
	counts := map[Kind]int{}
	for _, ev := range events {
		counts[ev.Kind]++
		if ev.Kind == KindMessage && ev.Role == RoleUser && len(sum.Goals) == 0 {
			if m, err := ev.Message(); err == nil {
				sum.Goals = append(sum.Goals, m.Content)
			}
		}
		if ev.Kind == KindCompaction {
			if c, err := ev.Compaction(); err == nil {
				sum.Goals = append(sum.Goals, c.Summary.Goals...)
			}
		}
	}
	b, err := json.Marshal(counts)
	if err != nil {
		return Summary{}, err
	}
	sum.Text = fmt.Sprintf("%d events summarized: %s", len(events), b)
	return sum, nil
}
