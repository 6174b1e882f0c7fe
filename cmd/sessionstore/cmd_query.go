package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// labelFlags collects -label key=value flags.
type labelFlags map[string]string

func (l labelFlags) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	l[k] = val
	return nil
}

// timeFlag is a -since or -until flag: an RFC 3339 time.
type timeFlag struct{ t *time.Time }

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f timeFlag) Set(v string) error {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return errors.New("want an RFC 3339 time, e.g. 2026-08-25T17:21:23Z")
	}
	*f.t = t
	return nil
}

// cmdQuery lists one page of the sessions a query selects, newest
// first, and the cursor of the next page (Store.ListPage).
func cmdQuery(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-parent id] [-cwd dir] [-label k=v]... [-since t] [-until t] [-limit n] [-cursor c] [-json] <root>")
	var q sessionstore.Query
	parent := fs.String("parent", "", "only the subagents of this session (its full id)")
	fs.StringVar(&q.WorkingDir, "cwd", "", "only sessions with this working directory")
	labels := labelFlags{}
	fs.Var(labels, "label", "only sessions with this label (key=value; repeat for more, all must match)")
	fs.Var(timeFlag{&q.Since}, "since", "only sessions created at or after this time (RFC 3339)")
	fs.Var(timeFlag{&q.Until}, "until", "only sessions created before this time (RFC 3339)")
	fs.IntVar(&q.Limit, "limit", sessionstore.DefaultPageSize, "the page size")
	cursor := fs.String("cursor", "", "the cursor a previous page printed")
	asJSON := fs.Bool("json", false, "print each session's metadata as one JSON object per line")
	s, pos, status := c.openStore(fs, args, 1, 1)
	if s == nil {
		return status
	}
	defer s.Close()
	if *parent != "" {
		id, err := uuid.Parse(*parent)
		if err != nil {
			return c.usagef(fs, "-parent %q is not a session id", *parent)
		}
		q.ParentSession = id
	}
	if q.Limit <= 0 {
		return c.usagef(fs, "-limit %d: want a positive page size", q.Limit)
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

var _ flag.Value = labelFlags{}
