package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// cmdTrash lists the deleted sessions the trash keeps (Store.Trash),
// newest deletion first. It opens the store read-only.
func cmdTrash(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("<root>")
	s, pos, status := c.openStore(fs, args, 1, 1)
	if s == nil {
		return status
	}
	defer s.Close()
	items, err := s.Trash(ctx)
	if err != nil {
		return c.failf("read the trash of %q: %s", pos[0], describe(err))
	}
	if len(items) == 0 {
		c.warnf("the trash of %q is empty", pos[0])
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tDELETED\tPURGED AFTER\tBYTES")
	for _, it := range items {
		name := cell(it.Meta.Name)
		if it.Err != nil {
			name = "(" + describe(it.Err) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", it.Meta.ID, name, stamp(it.DeletedAt), stamp(it.PurgeAt), it.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return c.failf("write output: %v", err)
	}
	return exitOK
}

// resolveTrashed turns arg (a full id or a unique prefix) into the id of
// a session in the trash of s, or, with live, of a session in the trash
// or in the store: a prefix is matched against both at once, so that one
// that names a session of each is refused as ambiguous.
func resolveTrashed(ctx context.Context, s *sessionstore.Store, arg string, live bool) (uuid.UUID, error) {
	items, err := s.Trash(ctx)
	if err != nil {
		return uuid.Nil, fmt.Errorf("read the trash: %s", describe(err))
	}
	var ids []uuid.UUID // once each: an id deleted twice is in the trash twice
	add := func(id uuid.UUID) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, it := range items {
		add(it.Meta.ID)
	}
	if live {
		metas, err := s.List(ctx)
		var listErr *sessionstore.ListError
		if err != nil && !errors.As(err, &listErr) {
			return uuid.Nil, fmt.Errorf("list the sessions to match %q: %s", arg, describe(err))
		}
		for _, m := range metas {
			add(m.ID)
		}
		if listErr != nil {
			for _, u := range listErr.Unreadable {
				add(u.ID)
			}
		}
	}
	id, err := matchPrefix("session", arg, ids)
	if errors.Is(err, sessionstore.ErrNotFound) {
		where := "the trash of"
		if live {
			where = "the store or the trash of"
		}
		err = &notFoundError{fmt.Sprintf("no session in %s %q matches %q", where, s.Dir(), arg)}
	}
	return id, err
}

// cmdUndelete brings a session back from the trash (Store.Undelete). It
// opens the store for writing.
func cmdUndelete(ctx context.Context, c *cmdEnv, args []string) int {
	return c.trashCommand(ctx, args, false, (*sessionstore.Store).Undelete, "back from the trash")
}

// cmdPurge removes a session for good (Store.Purge): from the trash,
// and from the store if it is there. It opens the store for writing.
func cmdPurge(ctx context.Context, c *cmdEnv, args []string) int {
	return c.trashCommand(ctx, args, true, (*sessionstore.Store).Purge, "purged")
}

// trashCommand runs undelete or purge: do on the session args name (in
// the trash, or with live in the store too; resolveTrashed), on the
// store opened for writing, then prints what was done.
func (c *cmdEnv) trashCommand(ctx context.Context, args []string, live bool, do func(*sessionstore.Store, context.Context, uuid.UUID) error, done string) int {
	fs := c.newFlags("<root> <session>")
	pos, status, ok := c.parseArgs(fs, args, 2, 2, "session")
	if !ok {
		return status
	}
	s, err := openWritable(pos[0])
	if err != nil {
		return c.failf("%v", err)
	}
	id, err := resolveTrashed(ctx, s, pos[1], live)
	if err == nil {
		err = do(s, ctx, id)
	}
	closeErr := s.Close()
	switch {
	case errors.Is(err, sessionstore.ErrHasForks):
		return c.failf("session %s: %v (remove the forks first)", id, err)
	case err != nil:
		return c.failf("%s", describe(err))
	}
	fmt.Fprintf(c.stdout, "%s: %s\n", id, done)
	if closeErr != nil {
		return c.failf("close the store: %v", closeErr)
	}
	return exitOK
}
