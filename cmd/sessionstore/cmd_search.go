package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// searchHitJSON is a hit as search -json prints it, one object a line.
type searchHitJSON struct {
	Session uuid.UUID         `json:"session"`
	Event   uuid.UUID         `json:"event"`
	Kind    sessionstore.Kind `json:"kind"`
	Role    sessionstore.Role `json:"role,omitempty"`
	Time    time.Time         `json:"time"`
	Rank    float64           `json:"rank"`
	Snippet string            `json:"snippet"`
}

// roleFlags collects -role flags; "none" names the empty role (events
// such as custom ones that have none).
type roleFlags []sessionstore.Role

func (r *roleFlags) String() string {
	parts := make([]string, len(*r))
	for i, v := range *r {
		parts[i] = string(v)
		if v == sessionstore.RoleNone {
			parts[i] = "none"
		}
	}
	return strings.Join(parts, ",")
}

func (r *roleFlags) Set(v string) error {
	if v == "none" {
		v = ""
	}
	*r = append(*r, sessionstore.Role(v))
	return nil
}

// kindFlags collects -kind flags.
type kindFlags []sessionstore.Kind

func (k *kindFlags) String() string {
	parts := make([]string, len(*k))
	for i, v := range *k {
		parts[i] = string(v)
	}
	return strings.Join(parts, ",")
}

func (k *kindFlags) Set(v string) error {
	*k = append(*k, sessionstore.Kind(v))
	return nil
}

// cmdSearch prints the events whose records hold the words and phrases
// given (Store.Search), best first: session, event, kind, role, rank and
// a snippet around the match. The arguments after <root> are joined by
// spaces into the search text: words, and "exact phrases" in double
// quotes (quoted for the shell too: '"the file"'); an event matches when
// its record holds every one, as whole words, whatever their case.
func cmdSearch(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-parent id] [-cwd dir] [-label k=v]... [-since t] [-until t] [-kind k]... [-role r]... [-limit n] [-json] <root> <text>...")
	var q sessionstore.SearchQuery
	parent := fs.String("parent", "", "only the subagents of this session (its id, or a unique prefix of it or of its short id)")
	fs.StringVar(&q.WorkingDir, "cwd", "", "only sessions with this working directory")
	labels := labelFlags{}
	fs.Var(labels, "label", "only sessions with this label (key=value; repeat for more, all must match)")
	fs.Var(newTimeFlag(&q.Since), "since", "only sessions created at or after this `time` (RFC 3339, a date, or a duration before now)")
	fs.Var(newTimeFlag(&q.Until), "until", "only sessions created before this `time` (RFC 3339, a date, or a duration before now)")
	var kinds kindFlags
	fs.Var(&kinds, "kind", "only events of this `kind` (message, tool_call, tool_result, compaction, branch_summary, custom; repeat for more)")
	var roles roleFlags
	fs.Var(&roles, "role", "only events of this `role` (user, assistant, tool, or none; repeat for more)")
	fs.IntVar(&q.Limit, "limit", sessionstore.DefaultSearchLimit, fmt.Sprintf("the most hits to print (at most %d)", sessionstore.MaxSearchLimit))
	asJSON := fs.Bool("json", false, "print each hit as one JSON object per line (session, event, kind, role, time, rank, snippet)")
	pos, status, ok := c.parseArgs(fs, args, 2, -1)
	if !ok {
		return status
	}
	switch {
	case *parent != "" && !wellFormedID(*parent):
		return c.usagef(fs, "-parent %q is neither an id nor an id prefix (hex digits, and dashes where the id has them)", *parent)
	case q.Limit <= 0 || q.Limit > sessionstore.MaxSearchLimit:
		return c.usagef(fs, "-limit %d: want from 1 to %d hits", q.Limit, sessionstore.MaxSearchLimit)
	}
	q.Text = strings.Join(pos[1:], " ")
	q.Kinds, q.Roles = kinds, roles
	if len(labels) > 0 {
		q.Labels = labels
	}
	s, err := c.openReadOnly(pos[0])
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()
	if q.ParentSession, err = parentSession(ctx, s, *parent); err != nil {
		return c.failf("-parent: %v", err)
	}
	var (
		enc = json.NewEncoder(c.stdout)
		tw  = tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		n   int
	)
	for h, err := range s.Search(ctx, q) {
		switch {
		case errors.Is(err, sessionstore.ErrInvalidSearch):
			return c.usagef(fs, "%s", describe(err))
		case err != nil:
			tw.Flush()
			return c.failf("search the sessions in %q: %s", pos[0], describe(err))
		}
		if *asJSON {
			if err := enc.Encode(searchHitJSON{Session: h.Session, Event: h.Event, Kind: h.Kind, Role: h.Role, Time: h.Time, Rank: h.Rank, Snippet: h.Snippet}); err != nil {
				return c.failf("encode hit %s: %v", h.Event, err)
			}
		} else {
			if n == 0 {
				fmt.Fprintln(tw, "SESSION\tEVENT\tKIND\tROLE\tRANK\tSNIPPET")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t%s\n", h.Session, h.Event, h.Kind, cell(string(h.Role)), h.Rank, snippetCell(h.Snippet))
		}
		n++
	}
	tw.Flush()
	switch {
	case n == 0:
		c.warnf("no event matches")
	case n == q.Limit:
		c.warnf("%d hits shown, there may be more: raise -limit (at most %d) or narrow the search", n, sessionstore.MaxSearchLimit)
	}
	return exitOK
}

// snippetCell is a snippet as the table's last column: "-" when empty,
// quoted when it holds control characters, else as it is (Search keeps it
// short, on one line).
func snippetCell(s string) string {
	switch {
	case s == "":
		return "-"
	case strings.ContainsFunc(s, unicode.IsControl):
		return strconv.Quote(s)
	}
	return s
}
