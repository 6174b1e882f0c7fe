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
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// cmdLs lists the sessions of a root.
func cmdLs(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-json] <root>")
	asJSON := fs.Bool("json", false, "print each session's metadata as one JSON object per line")
	s, pos, status := c.openStore(fs, args, 1, 1)
	if s == nil {
		return status
	}
	defer s.Close()
	root := pos[0]
	metas, err := s.List(ctx)
	if err != nil {
		return c.failf("list sessions in %q: %v", root, err)
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, m := range metas {
			if err := enc.Encode(m); err != nil {
				return c.failf("encode session %s: %v", m.ID, err)
			}
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tUPDATED\tWORKING DIR\tMODEL")
	for _, m := range metas {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, cell(m.Name), stamp(m.CreatedAt), stamp(m.UpdatedAt), cell(m.WorkingDir), cell(m.Model))
	}
	tw.Flush()
	return exitOK
}

// cell is a text field as a column value: "-" when empty, quoted when it
// holds characters that would break the columns.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cmdTree prints a session's events as a tree, without reading a record.
func cmdTree(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-full] [-forks] <root> <session>")
	full := fs.Bool("full", false, "print full event ids")
	forks := fs.Bool("forks", false, "indent a child only where its parent has several (for long sessions)")
	s, session, _, status := c.openSession(ctx, fs, args, 2, 2)
	if s == nil {
		return status
	}
	defer s.Close()
	nodes, treeErr := s.Tree(ctx, session)
	if treeErr != nil && len(nodes) == 0 {
		return c.failf("session %s: %s", session, describe(treeErr))
	}
	head, err := s.Head(ctx, session)
	if err != nil && treeErr == nil {
		return c.failf("session %s: HEAD: %s", session, describe(err))
	}
	if len(nodes) == 0 {
		c.warnf("session %s has no events", session)
		return exitOK
	}
	name := shortID
	if *full {
		name = uuid.UUID.String
	}

	known := make(map[uuid.UUID]bool, len(nodes))
	for _, n := range nodes {
		known[n.ID] = true
	}
	children := make(map[uuid.UUID][]int, len(nodes))
	var roots []int
	for i, n := range nodes {
		if n.ParentID == uuid.Nil || !known[n.ParentID] {
			roots = append(roots, i)
			continue
		}
		children[n.ParentID] = append(children[n.ParentID], i)
	}

	// Depth first, children in append order, without recursion: a
	// session's path can be 100,000 events deep.
	type frame struct{ node, depth int }
	stack := make([]frame, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, frame{roots[i], 0})
	}
	var line strings.Builder
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := nodes[f.node]
		line.Reset()
		line.WriteString(strings.Repeat("  ", f.depth))
		fmt.Fprintf(&line, "%s %-14s %-9s %8d B", name(n.ID), n.Kind, roleName(n.Role), n.Size)
		if n.ID == head {
			line.WriteString("  [HEAD]")
		}
		if n.BranchFrom != uuid.Nil {
			fmt.Fprintf(&line, "  [branch from %s]", name(n.BranchFrom))
		}
		if n.ParentID != uuid.Nil && !known[n.ParentID] {
			fmt.Fprintf(&line, "  [parent %s missing]", n.ParentID)
		}
		line.WriteByte('\n')
		c.stdout.WriteString(line.String())

		kids := children[n.ID]
		depth := f.depth + 1
		if *forks && len(kids) == 1 {
			depth = f.depth
		}
		for i := len(kids) - 1; i >= 0; i-- {
			stack = append(stack, frame{kids[i], depth})
		}
	}
	if treeErr != nil {
		return c.failf("session %s: %s (above: the events before it)", session, describe(treeErr))
	}
	return exitOK
}

func roleName(r sessionstore.Role) string {
	if r == sessionstore.RoleNone {
		return "-"
	}
	return string(r)
}

// cmdPath prints the active path of a session, or the branch ending at a
// given event, as Load and LoadPath return them (from the newest
// compaction on).
func cmdPath(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-json] [-width n] <root> <session> [leaf]")
	asJSON := fs.Bool("json", false, "print each whole event as one JSON object per line")
	width := 120
	fs.Var((*widthFlag)(&width), "width", "truncate each record to `n` characters (0: no limit)")
	s, session, pos, status := c.openSession(ctx, fs, args, 2, 3)
	if s == nil {
		return status
	}
	defer s.Close()
	var events []sessionstore.Event
	var loadErr error
	if len(pos) == 3 {
		leaf, err := resolveEvent(ctx, s, session, pos[2])
		if err != nil {
			return c.failf("session %s: %v", session, err)
		}
		events, loadErr = s.LoadPath(ctx, session, leaf)
		if loadErr != nil && len(events) == 0 {
			return c.failf("session %s: leaf event %s: %s", session, leaf, describe(loadErr))
		}
	} else {
		events, loadErr = s.Load(ctx, session)
		if loadErr != nil && len(events) == 0 {
			return c.failf("session %s: %s", session, describe(loadErr))
		}
	}
	enc := json.NewEncoder(c.stdout)
	for _, ev := range events {
		if *asJSON {
			if err := enc.Encode(ev); err != nil {
				return c.failf("encode event %s: %v", ev.ID, err)
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%s %-14s %-9s %s\n", shortID(ev.ID), ev.Kind, roleName(ev.Role), truncate(recordText(ev), width))
	}
	if loadErr != nil {
		return c.failf("session %s: %s (above: the events before it)", session, describe(loadErr))
	}
	return exitOK
}

// recordText is the event's record as one line of compact JSON.
func recordText(ev sessionstore.Event) string {
	if ev.Record == nil {
		return fmt.Sprintf("(blob %s, %d bytes, not read)", ev.Digest, ev.Size)
	}
	return string(ev.Record)
}

// truncate shortens s to width characters, the last one an ellipsis when
// something was cut. Zero means no limit.
func truncate(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	cut, n := 0, 0
	for i := range s {
		if n == width-1 {
			cut = i
			break
		}
		n++
	}
	return s[:cut] + "…"
}

// cmdShow prints one event as indented JSON.
func cmdShow(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-lazy] <root> <session> <event>")
	lazy := fs.Bool("lazy", false, "do not read a blob: print its digest and size, with a null record")
	s, session, pos, status := c.openSession(ctx, fs, args, 3, 3)
	if s == nil {
		return status
	}
	defer s.Close()
	id, err := resolveEvent(ctx, s, session, pos[2])
	if err != nil {
		return c.failf("session %s: %v", session, err)
	}
	ev, err := s.Event(ctx, session, id)
	if err != nil {
		return c.failf("session %s: event %s: %s", session, id, describe(err))
	}
	if !*lazy {
		if ev, err = s.Resolve(ctx, session, ev); err != nil {
			return c.failf("session %s: event %s: read its blob: %s", session, id, describe(err))
		}
	}
	b, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return c.failf("encode event %s: %v", id, err)
	}
	c.stdout.Write(append(b, '\n'))
	return exitOK
}

// cmdVerify checks sessions and reports what it found; the status is 1 if
// any session has a problem or could not be checked.
func cmdVerify(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("<root> [session...]")
	s, pos, status := c.openStore(fs, args, 1, -1)
	if s == nil {
		return status
	}
	defer s.Close()
	root := pos[0]

	var sessions []uuid.UUID
	failed := 0
	if len(pos) == 1 {
		metas, err := s.List(ctx)
		if err != nil {
			return c.failf("list sessions in %q: %v", root, err)
		}
		for _, m := range metas {
			sessions = append(sessions, m.ID)
		}
		if len(sessions) == 0 {
			c.warnf("no sessions in %q", root)
			return exitOK
		}
	} else {
		for _, arg := range pos[1:] {
			id, err := resolveSession(ctx, s, arg)
			if err != nil {
				c.warnf("%v", err)
				failed++
				continue
			}
			sessions = append(sessions, id)
		}
	}

	for _, id := range sessions {
		rep, err := s.Verify(ctx, id)
		if err != nil {
			c.warnf("session %s: %s", id, describe(err))
			failed++
			continue
		}
		state := "ok"
		if !rep.OK() {
			state = "CORRUPT"
			failed++
		}
		head := "-"
		if rep.Head != uuid.Nil {
			head = rep.Head.String()
		}
		fmt.Fprintf(c.stdout, "%s %s: %d chunks (%d bytes), %d records, %d indexed, %d blobs, head %s\n",
			id, state, rep.Chunks, rep.ChunkBytes, rep.Records, rep.Indexed, rep.Blobs, head)
		for _, p := range rep.Problems {
			fmt.Fprintf(c.stdout, "  problem: %s at offset %d: %v\n", p.Path, p.Offset, p.Err)
		}
		if rep.Truncated {
			fmt.Fprintf(c.stdout, "  (more problems; only the first %d are listed)\n", len(rep.Problems))
		}
		for _, r := range rep.Repairs {
			fmt.Fprintf(c.stdout, "  repair on next open for writing: %s\n", r)
		}
	}
	if failed > 0 {
		total := len(sessions) // every session of the root
		if len(pos) > 1 {
			total = len(pos) - 1 // the ones named, found or not
		}
		return c.failf("%d of %d sessions have problems", failed, total)
	}
	return exitOK
}

// cmdGC removes the blobs of a session that no event refers to. It opens
// the store for writing: the session is locked, and opening it carries out
// the repairs Verify lists.
func cmdGC(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("<root> <session>")
	pos, status, ok := c.parseArgs(fs, args, 2, 2)
	if !ok {
		return status
	}
	root := pos[0]
	// Name the session through a read-only store first: it refuses a
	// directory that is not a store, where a writable Open would create one.
	ro, err := c.openReadOnly(root)
	if err != nil {
		return c.failf("%v", err)
	}
	session, err := resolveSession(ctx, ro, pos[1])
	ro.Close()
	if err != nil {
		return c.failf("%v", err)
	}

	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	rep, err := s.GC(ctx, session)
	closeErr := s.Close()
	if err != nil {
		return c.failf("session %s: %s", session, describe(err))
	}
	fmt.Fprintf(c.stdout, "%s: removed %d files (%d bytes): blobs no event refers to and temporary files; kept %d blobs\n",
		session, rep.Removed, rep.Bytes, rep.Kept)
	if closeErr != nil {
		return c.failf("close store: %v", closeErr)
	}
	return exitOK
}

// openWritable opens the store at root for writing, in the compression
// mode the root was created with (Open refuses the other one).
func openWritable(root string) (*sessionstore.Store, error) {
	s, err := sessionstore.Open(root, nil)
	if errors.Is(err, sessionstore.ErrCompressionMismatch) {
		s, err = sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	}
	if err != nil {
		return nil, fmt.Errorf("open store %q for writing: %w", root, err)
	}
	return s, nil
}
