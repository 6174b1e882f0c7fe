package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// cmdVersion prints the version of the module the command was built from.
func cmdVersion(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("")
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		return c.usagef(fs, "too many arguments: %s", strings.Join(pos, " "))
	}
	fmt.Fprintf(c.stdout, "sessionstore %s\n", buildVersion(debug.ReadBuildInfo()))
	return exitOK
}

// buildVersion is the version of the module the command was built from,
// as the Go toolchain recorded it ("v1.2.0" for go install ...@v1.2.0, a
// pseudo-version for a build in a checkout with VCS stamping), or
// "(devel)" when it recorded none.
func buildVersion(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil || info.Main.Version == "" {
		return "(devel)"
	}
	return info.Main.Version
}

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
	var listErr *sessionstore.ListError
	if err != nil && !errors.As(err, &listErr) {
		return c.failf("list the sessions in %q: %s", root, describe(err))
	}
	switch {
	case len(metas) == 0 && listErr == nil:
		c.warnf("no sessions in %q", root)
	case *asJSON:
		enc := json.NewEncoder(c.stdout)
		for _, m := range metas {
			if err := enc.Encode(m); err != nil {
				return c.failf("encode session %s: %v", m.ID, err)
			}
		}
	default:
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED\tUPDATED\tWORKING DIR\tMODEL\tTOKENS IN/OUT")
		for _, m := range metas {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, cell(m.Name), stamp(m.CreatedAt), stamp(m.UpdatedAt), cell(m.WorkingDir), cell(m.Model), usageCell(m.Usage))
		}
		tw.Flush()
	}
	if listErr != nil {
		for _, u := range listErr.Unreadable {
			c.warnf("session %s: %s", u.ID, unreadable(u))
		}
		return c.failf("%d of %d sessions in %q cannot be read (above: the others)", len(listErr.Unreadable), len(metas)+len(listErr.Unreadable), root)
	}
	return exitOK
}

// unreadable says why List could not read a session's metadata.
func unreadable(u sessionstore.UnreadableSession) string {
	var ce *sessionstore.CorruptionError
	if errors.As(u.Err, &ce) && ce.Path == u.Path {
		return fmt.Sprintf("cannot read %s: it is damaged at offset %d: %v", u.Path, ce.Offset, ce.Err)
	}
	var pe *fs.PathError
	if errors.As(u.Err, &pe) && pe.Path == u.Path {
		return fmt.Sprintf("cannot read %s: %v", u.Path, pe.Err)
	}
	return fmt.Sprintf("cannot read %s: %s", u.Path, describe(u.Err))
}

// maxCell is the most characters a column value of a table (ls, query)
// has: the columns are padded to their widest value, so a longer one
// (session.json holds a name of any length) would widen every line.
const maxCell = 120

// cell is a text field as a column value: "-" when empty, quoted when it
// holds characters that would break the columns, and cut to maxCell
// characters, the last one an ellipsis, when longer.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, unicode.IsControl) { // C0, DEL and C1
		s = strconv.Quote(s)
	}
	return truncate(s, maxCell)
}

// usageCell is ls's token column: the input (cache reads and writes
// included) and output tokens session.json records (Meta.Usage, read with
// the listing: no session is loaded), "-" when it records none (a session
// written before the store kept totals, or not closed since its first
// events). After a crash the recorded totals may lag the log until the
// session is next closed by a writer; Store.Usage is exact.
func usageCell(u *sessionstore.RecordedUsage) string {
	if u == nil {
		return "-"
	}
	var in, out int64
	for _, m := range u.Models {
		in += m.InputTokens + m.CacheReadTokens + m.CacheWriteTokens
		out += m.OutputTokens
	}
	return tokens(in) + "/" + tokens(out)
}

// tokens is n in a short form: 950, 12.3k, 4.5M.
func tokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cmdTree prints a session's events as a tree, without reading a record.
func cmdTree(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-full] <root> <session>")
	full := fs.Bool("full", false, "print full event ids")
	// -forks drew the default layout when the default indented every
	// event by its depth; it stays accepted so that command lines keep
	// working.
	fs.Bool("forks", false, "ignored: tree indents only where the tree forks, as this flag once asked")
	s, session, _, status := c.openSession(ctx, fs, args, 2, 2, "session")
	if s == nil {
		return status
	}
	defer s.Close()
	// HEAD and the active path's end are read before the tree, so that
	// the tree holds them while a writer appends.
	head, next, headErr, nextErr := activeEnds(ctx, s, session)
	nodes, treeErr := s.Tree(ctx, session)
	switch {
	case treeErr != nil && len(nodes) == 0:
		return c.failf("session %s: %s", session, describe(treeErr))
	case headErr != nil && treeErr == nil:
		return c.failf("session %s: HEAD: %s", session, describe(headErr))
	case nextErr != nil && treeErr == nil:
		return c.failf("session %s: the active path's end: %s", session, describe(nextErr))
	}
	if len(nodes) == 0 {
		c.warnf("session %s has no events", session)
		return exitOK
	}
	name := sessionstore.ShortID
	if *full {
		name = uuid.UUID.String
	}
	customSummaries(ctx, s, session, nodes)
	writeTree(c.stdout, nodes, head, next, name)
	if treeErr != nil {
		return c.failf("session %s: %s (above: the events before it)", session, describe(treeErr))
	}
	return exitOK
}

// activeEnds reads the session's HEAD and the end of its active path
// (NextParent) as they were at one moment. They are two reads: an append
// between them moves HEAD, and the event HEAD was would pass for a lane
// tip the next append extends, or HEAD for an event before the active
// path's end. So HEAD is read again after NextParent, until it has not
// moved meanwhile; beside a writer that appends without pause, after a
// few tries, next is the HEAD read last (the appends go on from it).
func activeEnds(ctx context.Context, s *sessionstore.Store, session uuid.UUID) (head, next uuid.UUID, headErr, nextErr error) {
	head, headErr = s.Head(ctx, session)
	for range 8 {
		next, _, nextErr = s.NextParent(ctx, session)
		again, err := s.Head(ctx, session)
		if headErr != nil || nextErr != nil || err != nil || again == head {
			return head, next, headErr, nextErr
		}
		head = again
	}
	return head, head, nil, nil
}

// customSummaries gives the custom events of nodes whose preview is the
// start of a JSON object (a record kept as an importer found it,
// {"parentUuid":...}) a readable one instead: web.Summary of the record,
// read for them alone. A record that does not read keeps its preview.
func customSummaries(ctx context.Context, s *sessionstore.Store, session uuid.UUID, nodes []sessionstore.Node) {
	for i := range nodes {
		n := &nodes[i]
		if n.Kind != sessionstore.KindCustom || !strings.HasPrefix(n.Preview, "{") || strings.HasPrefix(n.Preview, `{"sessionstore":`) {
			continue
		}
		ev, err := s.Event(ctx, session, n.ID)
		if err != nil || ev.Record == nil {
			continue
		}
		if sum := web.Summary(ev.Record); sum != "" {
			n.Preview = sum
		}
	}
}

// maxTreeLevel is the deepest level tree indents to: past it a line is
// indented as at this level and names its own level in brackets, so that
// a line stays short however many forks lie above it.
const maxTreeLevel = 16

// writeTree writes nodes (a session's tree, in append order) one per line,
// depth first, each node's children in append order: id (name gives its
// form), kind, role, record size, then [HEAD] on head, [NEXT] on next (the
// end of the active path, which path prints and the next append extends)
// when it is not head (a lane switched to and not appended to yet),
// [branch from <id>]
// on an event that starts a branch, [parent <id> missing] on one whose
// parent is not among nodes (it is drawn as a root), and the node's
// preview, quoted.
//
// Lines are indented only where the tree forks: the children of an event
// with several are one level deeper than it, and the first line of each
// of their branches starts with "- "; an only child stays at its parent's
// level, so a chain of events is a column:
//
//	9e3779b1 message  user       "Build the feature."
//	- 3c6ef362 message  assistant  "Running the tests first."
//	  daa66d13 tool_call  assistant  "run_tests"
//	- 17156075 message  assistant  [branch from 9e3779b1]  "Approach B"
//
// A level is two columns, up to maxTreeLevel; deeper lines are indented as
// at maxTreeLevel and name their level, "[17] ". Every line is thus at
// most a few hundred bytes, and the output linear in the number of
// events, however deep the session or its forks.
func writeTree(w *bufio.Writer, nodes []sessionstore.Node, head, next uuid.UUID, name func(uuid.UUID) string) {
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
	// session's path can be 100,000 events deep. A frame is a node to
	// print, its level, and whether it starts one of a fork's branches.
	type frame struct {
		node, level int
		starts      bool
	}
	stack := make([]frame, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, frame{roots[i], 0, false})
	}
	spaces := strings.Repeat("  ", maxTreeLevel)
	var line []byte
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := nodes[f.node]
		indent := 2 * min(f.level, maxTreeLevel)
		if f.starts && f.level <= maxTreeLevel {
			indent -= 2 // the "- " takes the level's two columns
		}
		line = append(line[:0], spaces[:indent]...)
		if f.level > maxTreeLevel {
			line = fmt.Appendf(line, "[%d] ", f.level)
		}
		if f.starts {
			line = append(line, "- "...)
		}
		line = fmt.Appendf(line, "%s %-14s %-9s %8d B", name(n.ID), n.Kind, roleName(n.Role), n.Size)
		if n.ID == head {
			line = append(line, "  [HEAD]"...)
		}
		if n.ID == next && next != head {
			line = append(line, "  [NEXT]"...)
		}
		if n.BranchFrom != uuid.Nil {
			line = fmt.Appendf(line, "  [branch from %s]", name(n.BranchFrom))
		}
		if n.ParentID != uuid.Nil && !known[n.ParentID] {
			line = fmt.Appendf(line, "  [parent %s missing]", n.ParentID)
		}
		if n.Preview != "" {
			// Quoted: a preview holds no control character, but it may
			// hold "[HEAD]", "- " or anything else the layout uses.
			line = append(line, "  "...)
			line = strconv.AppendQuote(line, n.Preview)
		}
		line = append(line, '\n')
		w.Write(line)

		kids := children[n.ID]
		if len(kids) == 1 {
			stack = append(stack, frame{kids[0], f.level, false})
			continue
		}
		for i := len(kids) - 1; i >= 0; i-- {
			stack = append(stack, frame{kids[i], f.level + 1, true})
		}
	}
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
	fs.Var((*countFlag)(&width), "width", "truncate each record to `n` characters (0: no limit)")
	s, session, pos, status := c.openSession(ctx, fs, args, 2, 3, "session", "event")
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
	if len(events) == 0 {
		c.warnf("session %s has no events", session)
		return exitOK
	}
	for _, ev := range events {
		if *asJSON {
			b, err := eventJSON(ev)
			if err != nil {
				return c.failf("encode event %s: %v", ev.ID, err)
			}
			c.stdout.Write(append(b, '\n'))
			continue
		}
		fmt.Fprintf(c.stdout, "%s %-14s %-9s %s\n", sessionstore.ShortID(ev.ID), ev.Kind, roleName(ev.Role), truncate(recordText(ev), width))
	}
	if loadErr != nil {
		return c.failf("session %s: %s (above: the events before it)", session, describe(loadErr))
	}
	return exitOK
}

// eventJSON is ev as compact JSON, in the member names of the chunk lines,
// with a null parent_id for a root (no parent) in place of the nil uuid.
func eventJSON(ev sessionstore.Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	if ev.ParentID != uuid.Nil {
		return b, nil
	}
	// The encoding starts {"id":"<36 characters>", then parent_id.
	start := len(`{"id":"`) + 36 + len(`",`)
	nilParent := `"parent_id":"` + uuid.Nil.String() + `"`
	if len(b) < start || !bytes.HasPrefix(b[start:], []byte(nilParent)) {
		return nil, fmt.Errorf("unexpected JSON encoding of event %s", ev.ID)
	}
	return slices.Concat(b[:start], []byte(`"parent_id":null`), b[start+len(nilParent):]), nil
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

// cmdShow prints one event as indented JSON. An event that reads intact is
// printed even when the library reports an error beside it (the error then
// follows on stderr, and the status is 1).
func cmdShow(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-lazy] <root> <session> <event>")
	lazy := fs.Bool("lazy", false, "do not read a blob: print its digest and size, with a null record")
	s, session, pos, status := c.openSession(ctx, fs, args, 3, 3, "session", "event")
	if s == nil {
		return status
	}
	defer s.Close()
	id, err := resolveEvent(ctx, s, session, pos[2])
	if err != nil {
		return c.failf("session %s: %v", session, err)
	}
	ev, evErr := s.Event(ctx, session, id)
	if evErr != nil && ev.ID != id {
		return c.failf("session %s: event %s: %s", session, id, describe(evErr))
	}
	var blobErr error
	if !*lazy {
		if resolved, err := s.Resolve(ctx, session, ev); err != nil {
			blobErr = err // print the event without its record
		} else {
			ev = resolved
		}
	}
	b, err := eventJSON(ev)
	if err == nil {
		var out bytes.Buffer
		if err = json.Indent(&out, b, "", "  "); err == nil {
			out.WriteByte('\n')
			c.stdout.Write(out.Bytes())
		}
	}
	if err != nil {
		return c.failf("encode event %s: %v", id, err)
	}
	status = exitOK
	if evErr != nil {
		status = c.failf("session %s: event %s (printed above): %s", session, id, describe(evErr))
	}
	if blobErr != nil {
		status = c.failf("session %s: event %s: cannot read its blob, so it is printed above without its record: %s", session, id, describe(blobErr))
	}
	return status
}

// cmdVerify checks sessions and reports what it found; the status is 1 if
// any session has a problem or could not be checked.
func cmdVerify(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("<root> [session...]")
	s, pos, status := c.openStore(fs, args, 1, -1, "session")
	if s == nil {
		return status
	}
	defer s.Close()
	root := pos[0]

	// The sessions to verify; unreadable[id] is why List could not read
	// one's session.json.
	var sessions []uuid.UUID
	unreadableMeta := map[uuid.UUID]sessionstore.UnreadableSession{}
	var failed, notFound, ambiguous int
	if len(pos) == 1 {
		metas, err := s.List(ctx)
		var listErr *sessionstore.ListError
		if err != nil && !errors.As(err, &listErr) {
			return c.failf("list the sessions in %q: %s", root, describe(err))
		}
		for _, m := range metas {
			sessions = append(sessions, m.ID)
		}
		if listErr != nil {
			for _, u := range listErr.Unreadable {
				sessions = append(sessions, u.ID)
				unreadableMeta[u.ID] = u
			}
			slices.SortFunc(sessions, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		}
		if len(sessions) == 0 {
			c.warnf("no sessions in %q", root)
			return exitOK
		}
	} else {
		for _, arg := range pos[1:] {
			id, err := resolveSession(ctx, s, arg)
			var amb *ambiguousError
			switch {
			case errors.Is(err, sessionstore.ErrNotFound):
				notFound++
			case errors.As(err, &amb):
				ambiguous++
			case err != nil:
				return c.failf("%v", err)
			}
			if err != nil {
				c.warnf("%v", err)
				continue
			}
			sessions = append(sessions, id)
		}
	}

	verified, records, blobs := 0, 0, 0
	for _, id := range sessions {
		u, isUnreadable := unreadableMeta[id]
		rep, err := s.Verify(ctx, id)
		switch {
		case err != nil && isUnreadable:
			verified++
			failed++
			c.warnf("session %s: %s", id, unreadable(u))
			continue
		case errors.Is(err, sessionstore.ErrNotFound):
			notFound++
			c.warnf("session %s not found in %q (removed since it was listed?)", id, root)
			continue
		case err != nil:
			verified++
			failed++
			c.warnf("session %s: cannot verify it: %s", id, describe(err))
			continue
		}
		verified++
		state := "ok"
		if !rep.OK() {
			state = "CORRUPT"
			failed++
		} else if isUnreadable {
			failed++ // Verify read it since; List could not
			c.warnf("session %s: %s", id, unreadable(u))
		}
		records += rep.Records
		blobs += rep.Blobs
		// RecordBytes counts the records' chunk lines whole (each record
		// framed with its id, parent, time and checksum), uncompressed.
		blobsText := count(rep.Blobs, "blob")
		if rep.SplitBlobs > 0 {
			// Split blobs: records whose long strings are stored apart,
			// each string once however many records hold it.
			blobsText += fmt.Sprintf(" (%d split, their %s stored once)", rep.SplitBlobs, count(rep.Strings, "long string"))
		}
		fmt.Fprintf(c.stdout, "%s %s: %s (%d bytes of chunk lines), %d indexed, %s (%d bytes on disk), %s, head %s\n",
			id, state, count(rep.Records, "record"), rep.RecordBytes, rep.Indexed,
			count(rep.Chunks, "chunk file"), rep.ChunkBytes, blobsText, idOrNone(rep.Head, uuid.UUID.String))
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
	if failed == 0 && notFound == 0 && ambiguous == 0 {
		fmt.Fprintf(c.stdout, "ok: %s, %s, %s checked\n", count(verified, "session"), count(records, "record"), count(blobs, "blob"))
		return exitOK
	}
	var summary []string
	if verified > 0 {
		summary = append(summary, fmt.Sprintf("%d of %d sessions have problems", failed, verified))
	} else {
		summary = append(summary, "no session verified")
	}
	if notFound > 0 {
		summary = append(summary, fmt.Sprintf("%d not found", notFound))
	}
	if ambiguous > 0 {
		summary = append(summary, fmt.Sprintf("%d ambiguous", ambiguous))
	}
	return c.failf("%s", strings.Join(summary, "; "))
}

// count is "1 <noun>" or "<n> <noun>s".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// resolveForWriting names the session of pos[1] through a read-only store,
// which refuses a directory that is not a store (where a writable Open
// would create one), and returns it with the read-only store, which the
// caller closes.
func (c *cmdEnv) resolveForWriting(ctx context.Context, root, arg string) (*sessionstore.Store, uuid.UUID, error) {
	ro, err := c.openReadOnly(root)
	if err != nil {
		return nil, uuid.Nil, err
	}
	session, err := resolveSession(ctx, ro, arg)
	if err != nil {
		ro.Close()
		return nil, uuid.Nil, err
	}
	return ro, session, nil
}

// verifyFirst parses the arguments <root> <session> of a command that
// opens the store for writing (gc, repair), names the session through a
// read-only store and verifies it there. On failure rep is nil and the
// command exits with status.
func (c *cmdEnv) verifyFirst(ctx context.Context, args []string, doing string) (root string, session uuid.UUID, rep *sessionstore.VerifyReport, status int) {
	return c.verifyFirstWith(ctx, c.newFlags("<root> <session>"), args, doing)
}

// verifyFirstWith is verifyFirst parsing args with fs, a command's flags.
func (c *cmdEnv) verifyFirstWith(ctx context.Context, fs *flag.FlagSet, args []string, doing string) (root string, session uuid.UUID, rep *sessionstore.VerifyReport, status int) {
	pos, status, ok := c.parseArgs(fs, args, 2, 2, "session")
	if !ok {
		return "", uuid.Nil, nil, status
	}
	root = pos[0]
	ro, session, err := c.resolveForWriting(ctx, root, pos[1])
	if err != nil {
		return "", uuid.Nil, nil, c.failf("%v", err)
	}
	rep, err = ro.Verify(ctx, session)
	ro.Close()
	if err != nil {
		return "", uuid.Nil, nil, c.failf("session %s: cannot verify it before %s: %s", session, doing, describe(err))
	}
	return root, session, rep, exitOK
}

// cmdGC removes the blobs of a session that no event refers to. It verifies
// the session first and refuses a damaged one. It opens the store for
// writing: the session is locked, and opening it carries out the repairs
// Verify lists.
func cmdGC(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-dry-run] <root> <session>")
	dry := fs.Bool("dry-run", false, "say what would be removed, and remove nothing")
	// GC walks the index only; Verify reads every record and blob, so a
	// damaged session is caught before anything is removed.
	root, session, rep, status := c.verifyFirstWith(ctx, fs, args, "collecting")
	if rep == nil {
		return status
	}
	if !rep.OK() {
		next := ""
		if rep.Repairable() {
			next = fmt.Sprintf(", and `sessionstore repair %s %s` mends it", root, session)
		}
		return c.failf("session %s is damaged (%s): gc removes nothing from a damaged session; see %s for the problems%s",
			session, count(len(rep.Problems), "problem"), verifyHint(root, session), next)
	}

	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	gc, err := s.GCWith(ctx, session, sessionstore.GCOptions{DryRun: *dry})
	closeErr := s.Close()
	if err != nil {
		return c.failf("session %s: %s", session, describe(err))
	}
	removed := "removed"
	if *dry {
		removed = "would remove (dry run: nothing removed)"
	}
	fmt.Fprintf(c.stdout, "%s: %s %d files (%d bytes): blobs no event refers to and temporary files; kept %d blobs\n",
		session, removed, gc.Removed, gc.Bytes, gc.Kept)
	if closeErr != nil {
		return c.failf("close the store: %v", closeErr)
	}
	return exitOK
}

// cmdRepair makes the repairs Verify lists for a session (a torn tail cut,
// the index rebuilt, HEAD set) now, and prints them.
func cmdRepair(ctx context.Context, c *cmdEnv, args []string) int {
	// Opening a session for writing reads only the records past the index,
	// so it does not see a damaged record in the middle of a chunk; Verify
	// reads them all.
	root, session, rep, status := c.verifyFirst(ctx, args, "repairing")
	if rep == nil {
		return status
	}
	if !rep.Repairable() {
		return c.failf("session %s is damaged beyond repair (%s), so nothing was changed; see %s for the problems",
			session, count(len(rep.Problems), "problem"), verifyHint(root, session))
	}
	if rep.Lost != nil {
		// The one damage a repair mends: say what is gone before cutting it.
		c.warnf("session %s: %v; the repair cuts what is left of them (keeping it aside), so that the session takes appends again", session, rep.Lost)
	}

	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	done, err := s.Repair(ctx, session)
	closeErr := s.Close()
	if errors.Is(err, sessionstore.ErrCorrupt) {
		return c.failf("session %s is damaged beyond repair, so nothing was changed: %v; see %s for the problems",
			session, err, verifyHint(root, session))
	}
	if err != nil {
		return c.failf("session %s: %s", session, describe(err))
	}
	for _, r := range done {
		fmt.Fprintf(c.stdout, "repaired: %s\n", r)
	}
	if len(done) == 0 {
		fmt.Fprintln(c.stdout, "nothing to repair")
	}
	if closeErr != nil {
		return c.failf("close the store: %v", closeErr)
	}
	return exitOK
}

// openWritable opens the store at root for writing, in the compression
// mode the root was created with (Open refuses the other one).
func openWritable(root string) (*sessionstore.Store, error) {
	keys, err := envKeys()
	if err != nil {
		return nil, err
	}
	s, err := sessionstore.Open(root, &sessionstore.Options{Keys: keys})
	if errors.Is(err, sessionstore.ErrCompressionMismatch) {
		s, err = sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone, Keys: keys})
	}
	if err != nil {
		return nil, openError(root, err, " for writing")
	}
	return s, nil
}
