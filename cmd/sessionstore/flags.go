package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// countFlag is a flag that takes a count of 0 or more.
type countFlag int

func (n *countFlag) String() string { return strconv.Itoa(int(*n)) }

func (n *countFlag) Set(v string) error {
	i, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return errors.New("not a number")
	case i < 0:
		return fmt.Errorf("must be 0 or more, not %d", i)
	}
	*n = countFlag(i)
	return nil
}

// labelFlags collects -label key=value flags; a key given twice keeps its
// last value.
type labelFlags map[string]string

func (l labelFlags) String() string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

func (l labelFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	l[k] = val
	return nil
}

// timeFlag is a flag that names a moment, the same way for every command
// that takes one (query -since and -until, prune -older-than): an RFC 3339
// time ("2026-01-02T15:04:05Z", with a fraction of a second or not), a
// date ("2026-01-02", its midnight in UTC), or a duration before now
// ("720h", "90m"; parsed by time.ParseDuration, not negative).
type timeFlag struct {
	t   *time.Time
	now func() time.Time // time.Now, for a duration
}

// newTimeFlag returns the flag that sets *t.
func newTimeFlag(t *time.Time) timeFlag { return timeFlag{t: t, now: time.Now} }

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f timeFlag) Set(v string) error {
	t, err := parseMoment(v, f.now)
	if err != nil {
		return err
	}
	*f.t = t
	return nil
}

// parseMoment parses a timeFlag's value.
func parseMoment(v string, now func() time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("a negative duration (a duration counts back from now)")
		}
		return now().Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a time (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration before now (720h)")
}

// stringList collects the values of a repeatable flag, in order.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
