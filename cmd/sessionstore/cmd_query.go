package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// cmdQuery lists one page of the sessions a query selects, newest
// first, and the cursor of the next page (Store.ListPage).
func cmdQuery(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-parent id] [-cwd dir] [-label k=v]... [-since t] [-until t] [-limit n] [-cursor c] [-json] <root>")
	var q sessionstore.Query
	parent := fs.String("parent", "", "only the subagents of this session (its id, or a unique prefix of it or of its short id)")
	fs.StringVar(&q.WorkingDir, "cwd", "", "only sessions with this working directory")
	labels := labelFlags{}
	fs.Var(labels, "label", "only sessions with this label (key=value; repeat for more, all must match)")
	fs.Var(newTimeFlag(&q.Since), "since", "only sessions created at or after this `time` (RFC 3339, a date, or a duration before now)")
	fs.Var(newTimeFlag(&q.Until), "until", "only sessions created before this `time` (RFC 3339, a date, or a duration before now)")
	fs.IntVar(&q.Limit, "limit", sessionstore.DefaultPageSize, "the page size")
	cursor := fs.String("cursor", "", "the cursor a previous page printed")
	asJSON := fs.Bool("json", false, "print each session's metadata as one JSON object per line")
	pos, status, ok := c.parseArgs(fs, args, 1, 1)
	if !ok {
		return status
	}
	switch {
	case *parent != "" && !wellFormedID(*parent):
		return c.usagef(fs, "-parent %q is neither an id nor an id prefix (hex digits, and dashes where the id has them)", *parent)
	case q.Limit <= 0:
		return c.usagef(fs, "-limit %d: want a positive page size", q.Limit)
	}
	s, err := c.openReadOnly(pos[0])
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()
	if q.ParentSession, err = parentSession(ctx, s, *parent); err != nil {
		return c.failf("-parent: %v", err)
	}
	if len(labels) > 0 {
		q.Labels = labels
	}
	page, next, err := s.ListPage(ctx, q, *cursor)
	var listErr *sessionstore.ListError
	switch {
	case errors.Is(err, sessionstore.ErrInvalidQuery):
		return c.usagef(fs, "%s", describe(err))
	case err != nil && !errors.As(err, &listErr):
		return c.failf("list the sessions in %q: %s", pos[0], describe(err))
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, m := range page {
			if err := enc.Encode(m); err != nil {
				return c.failf("encode session %s: %v", m.ID, err)
			}
		}
	} else if len(page) > 0 {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED\tDEPTH\tPARENT\tWORKING DIR")
		for _, m := range page {
			parent := "-"
			if m.ParentSession != uuid.Nil {
				parent = m.ParentSession.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, cell(m.Name), stamp(m.CreatedAt), m.Depth, parent, cell(m.WorkingDir))
		}
		tw.Flush()
	}
	if next != "" {
		c.warnf("more: -cursor %s", next)
	}
	if listErr != nil {
		for _, u := range listErr.Unreadable {
			c.warnf("session %s: %s", u.ID, unreadable(u))
		}
		return c.failf("%d sessions on this page's way cannot be read (above: the others)", len(listErr.Unreadable))
	}
	return exitOK
}

// parentSession is the session a -parent flag names: none for "", a full
// id as it is (the subagents of a session removed since still name it),
// else the one session the prefix names.
func parentSession(ctx context.Context, s *sessionstore.Store, parent string) (uuid.UUID, error) {
	if parent == "" {
		return uuid.Nil, nil
	}
	if id, err := uuid.Parse(parent); err == nil {
		return id, nil
	}
	return resolveSession(ctx, s, parent)
}
