package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// lanesSynopsis is the lanes command's usage line.
const lanesSynopsis = "<root> <session> [create <name> <event> | move <name> <event> | switch <name> | delete <name>]"

// cmdLanes lists a session's lanes (named branches), the active one marked
// with "*", or, with a subcommand, changes them: create, move, switch and
// delete open the store for writing (the session is locked meanwhile) and
// return once the change is durable.
func cmdLanes(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags(lanesSynopsis)
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) < 2 {
		return c.usagef(fs, "missing arguments")
	}
	if !wellFormedID(pos[1]) {
		return c.usagef(fs, "session %q is neither an id nor an id prefix (hex digits, and dashes where the id has them)", pos[1])
	}
	root, sub := pos[0], pos[2:]
	if len(sub) == 0 {
		return c.listLanes(ctx, root, pos[1])
	}
	want := map[string]int{"create": 3, "move": 3, "switch": 2, "delete": 2}
	n, ok := want[sub[0]]
	switch {
	case !ok:
		return c.usagef(fs, "unknown lanes subcommand %q", sub[0])
	case len(sub) < n:
		return c.usagef(fs, "missing arguments to %s", sub[0])
	case len(sub) > n:
		return c.usagef(fs, "too many arguments: %s", strings.Join(sub[n:], " "))
	case n == 3 && !wellFormedID(sub[2]):
		return c.usagef(fs, "event %q is neither an id nor an id prefix", sub[2])
	}
	return c.changeLanes(ctx, root, pos[1], sub)
}

// listLanes prints the lanes of the session arg through a read-only store.
func (c *cmdEnv) listLanes(ctx context.Context, root, arg string) int {
	s, err := c.openReadOnly(root)
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()
	session, err := resolveSession(ctx, s, arg)
	if err != nil {
		return c.failf("%v", err)
	}
	lanes, err := s.Lanes(ctx, session)
	if err != nil {
		return c.failf("session %s: %s", session, describe(err))
	}
	width := 0
	for _, l := range lanes {
		width = max(width, len(l.Name))
	}
	for _, l := range lanes {
		mark := " "
		if l.Active {
			mark = "*"
		}
		tip := "-"
		if l.Tip != uuid.Nil {
			tip = l.Tip.String()
		}
		fmt.Fprintf(c.stdout, "%s %-*s  %s  %s\n", mark, width, l.Name, tip, stamp(l.SetAt))
	}
	return exitOK
}

// changeLanes runs the lanes subcommand sub on the session arg, with the
// store opened for writing.
func (c *cmdEnv) changeLanes(ctx context.Context, root, arg string, sub []string) int {
	ro, session, err := c.resolveForWriting(ctx, root, arg)
	if err != nil {
		return c.failf("%v", err)
	}
	var event uuid.UUID
	if len(sub) == 3 {
		event, err = resolveEvent(ctx, ro, session, sub[2])
	}
	ro.Close()
	if err != nil {
		return c.failf("%v", err)
	}
	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	name := sub[1]
	switch sub[0] {
	case "create":
		err = s.CreateLane(ctx, session, name, event)
	case "move":
		err = s.MoveLane(ctx, session, name, event)
	case "switch":
		err = s.SwitchLane(ctx, session, name)
	case "delete":
		err = s.DeleteLane(ctx, session, name)
	}
	closeErr := s.Close()
	if err != nil {
		return c.failf("session %s: %s", session, describe(err))
	}
	if closeErr != nil {
		return c.failf("close the store: %v", closeErr)
	}
	fmt.Fprintf(c.stdout, "%s: lanes %s %s: done\n", session, sub[0], name)
	return exitOK
}
