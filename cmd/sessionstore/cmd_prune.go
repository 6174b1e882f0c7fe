package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sessionstore/sessionstore"
)

// cmdPrune removes the sessions a retention policy selects
// (Store.Prune), or with -dry-run lists them and removes nothing. A dry
// run opens the store read-only; a real one for writing.
func cmdPrune(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-dry-run] [-older-than t] [-keep n] [-recent d] [-label k=v]... [-dir path] <root>")
	dry := fs.Bool("dry-run", false, "list what would be removed, and remove nothing")
	var before time.Time
	fs.Var(newTimeFlag(&before), "older-than", "remove sessions last updated before this `time`: a duration before now (720h), a date (2026-01-02) or an RFC 3339 time")
	var keep countFlag
	fs.Var(&keep, "keep", "keep the `n` most recently updated of the matching sessions (0: keep none by count, with -older-than)")
	labels := labelFlags{}
	fs.Var(labels, "label", "only sessions with this label (`key=value`; repeatable)")
	dir := fs.String("dir", "", "only sessions whose working directory is `path`")
	recent := fs.Duration("recent", sessionstore.DefaultKeepRecent, "keep the sessions written or opened within this `duration` before now, whatever the policy (0: keep none for being recent)")
	pos, status, ok := c.parseArgs(fs, args, 1, 1)
	if !ok {
		return status
	}
	if before.IsZero() && keep == 0 {
		// Store.Prune refuses such a policy (ErrInvalidPolicy): it would
		// remove every session the filters match. -keep 0 keeps none
		// by count, which only -older-than can bound.
		keepGiven := false
		fs.Visit(func(f *flag.Flag) { keepGiven = keepGiven || f.Name == "keep" })
		if keepGiven {
			return c.usagef(fs, "-keep 0 without -older-than would remove every session the filters match, which prune refuses: give -keep 1 or more, or -older-than (-older-than 0s selects every matching session last updated before now)")
		}
		return c.usagef(fs, "set -older-than or -keep (prune refuses to remove every session the filters match)")
	}
	policy := sessionstore.PrunePolicy{Before: before, KeepNewest: int(keep), WorkingDir: *dir, DryRun: *dry, KeepRecent: *recent}
	if *recent <= 0 {
		policy.KeepRecent = -1 // asked for: none kept for being recent
	}
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
