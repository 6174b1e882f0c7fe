package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestParseMoment: the times query and prune take, parsed one way.
func TestParseMoment(t *testing.T) {
	now := time.Date(2026, 8, 25, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		in   string
		want time.Time
		err  string
	}{
		{in: "2026-01-02", want: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{in: "2026-01-02T15:04:05Z", want: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{in: "2026-01-02T15:04:05.25+02:00", want: time.Date(2026, 1, 2, 13, 4, 5, 250e6, time.UTC)},
		{in: "720h", want: now.Add(-720 * time.Hour)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "0s", want: now},
		{in: "-1h", err: "a negative duration"},
		{in: "2026-1-2", err: "want a time"},
		{in: "2026-01-02 15:04:05", err: "want a time"},
		{in: "", err: "want a time"},
	} {
		got, err := parseMoment(tc.in, clock)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, "%q", tc.in)
			continue
		}
		if assert.NoError(t, err, "%q", tc.in) {
			assert.True(t, tc.want.Equal(got), "%q: got %v, want %v", tc.in, got, tc.want)
		}
	}
}
