package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore"
)

// labelsFlag collects -label key=value flags.
type labelsFlag map[string]string

func (l labelsFlag) String() string {
	var parts []string
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (l labelsFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	l[k] = val
	return nil
}

// ageFlag is -older-than: a duration before now ("720h") or a time
// (RFC 3339, "2026-01-02T15:04:05Z", or a date, "2026-01-02").
type ageFlag struct{ t time.Time }

func (a *ageFlag) String() string {
	if a.t.IsZero() {
		return ""
	}
	return a.t.Format(time.RFC3339)
}

func (a *ageFlag) Set(v string) error {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return errors.New("a negative duration")
		}
		a.t = time.Now().Add(-d)
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			a.t = t
			return nil
		}
	}
	return errors.New("want a duration (720h) or a time (2026-01-02 or RFC 3339)")
}

// cmdPrune removes the sessions a retention policy selects
// (Store.Prune), or with -dry-run lists them and removes nothing. A dry
// run opens the store read-only; a real one for writing.
func cmdPrune(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-dry-run] [-older-than d|time] [-keep n] [-label k=v]... [-dir path] <root>")
	dry := fs.Bool("dry-run", false, "list what would be removed, and remove nothing")
	var age ageFlag
	fs.Var(&age, "older-than", "remove sessions last updated before this: a duration before now (720h) or a time")
	keep := fs.Int("keep", 0, "keep the `n` most recently updated of the matching sessions")
	labels := labelsFlag{}
	fs.Var(labels, "label", "only sessions with this label (`key=value`; repeatable)")
	dir := fs.String("dir", "", "only sessions whose working directory is `path`")
	pos, status, ok := c.parseArgs(fs, args, 1, 1)
	if !ok {
		return status
	}
	if age.t.IsZero() && *keep <= 0 {
		return c.usagef(fs, "set -older-than or -keep (prune refuses to remove every session)")
	}
	policy := sessionstore.PrunePolicy{Before: age.t, KeepNewest: *keep, WorkingDir: *dir, DryRun: *dry}
	if len(labels) > 0 {
		policy.Labels = labels
	}
	return c.prune(ctx, fs, pos[0], policy)
}

func (c *cmdEnv) prune(ctx context.Context, fs *flag.FlagSet, root string, policy sessionstore.PrunePolicy) int {
	var s *sessionstore.Store
	var err error
	if policy.DryRun {
		s, err = c.openReadOnly(root)
	} else {
		s, err = openWritable(root)
	}
	if err != nil {
		return c.failf("%v", err)
	}
	res, err := s.Prune(ctx, policy)
	closeErr := s.Close()
	if errors.Is(err, sessionstore.ErrInvalidPolicy) {
		return c.usagef(fs, "%v", err)
	}
	verb := "removed"
	if policy.DryRun {
		verb = "would remove"
	}
	for _, it := range res.Removed {
		fmt.Fprintf(c.stdout, "%s  %s  %d bytes  %s  %q\n", verb, it.Meta.ID, it.Bytes, it.Meta.UpdatedAt.Format(time.RFC3339), it.Meta.Name)
	}
	for _, it := range res.Skipped {
		fmt.Fprintf(c.stdout, "kept  %s  %s\n", it.Meta.ID, describe(it.Err))
	}
	fmt.Fprintf(c.stdout, "%s %s, %d bytes; kept %s the policy chose\n", verb, count(len(res.Removed), "session"), res.Bytes, count(len(res.Skipped), "session"))
	if err != nil {
		return c.failf("%s", describe(err))
	}
	if closeErr != nil {
		return c.failf("close the store: %v", closeErr)
	}
	return exitOK
}
