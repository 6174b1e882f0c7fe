package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// The workspace commands read the files a session's snapshots recorded
// (Store.SnapshotDir, RecordFiles; see the library's Workspaces): files
// lists the workspace as of an event, diff the paths that differ between
// two events, restore writes it into a directory.

// digestPrefix is how many hex digits of a file's SHA-256 files prints.
const digestPrefix = 12

// cmdFiles prints the workspace as of an event (default: the end of the
// active path), one file a line: mode, size, the start of its SHA-256,
// path.
func cmdFiles(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-json] <root> <session> [event]")
	asJSON := fs.Bool("json", false, "print each file's manifest entry as one JSON object per line")
	s, session, pos, status := c.openSession(ctx, fs, args, 2, 3, "session", "event")
	if s == nil {
		return status
	}
	defer s.Close()
	at := uuid.Nil
	if len(pos) == 3 {
		id, err := resolveEvent(ctx, s, session, pos[2])
		if err != nil {
			return c.failf("session %s: %v", session, err)
		}
		at = id
	}
	ws, err := s.Files(ctx, session, at)
	if err != nil {
		return c.failf("session %s: %s: %s", session, eventName(at), describe(err))
	}
	switch {
	case ws.At == uuid.Nil:
		c.warnf("session %s has no events", session)
		return exitOK
	case ws.Snapshot == uuid.Nil:
		c.warnf("session %s: no workspace snapshot on the path to event %s", session, ws.At)
		return exitOK
	}
	enc := json.NewEncoder(c.stdout)
	for _, f := range ws.Files {
		if *asJSON {
			if err := enc.Encode(f); err != nil {
				return c.failf("encode file %q: %v", f.Path, err)
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%s %10d %s %s\n", f.Mode.Perm(), f.Size, shortDigest(f.Digest), pathText(f.Path))
	}
	if len(ws.Files) == 0 {
		c.warnf("session %s: the workspace as of event %s (snapshot %s) has no files", session, ws.At, ws.Snapshot)
	}
	return exitOK
}

// changeJSON is a line of diff -json: a FileChange, with the file before
// and after (null where it is absent).
type changeJSON struct {
	Path string                  `json:"path"`
	Op   sessionstore.ChangeOp   `json:"op"`
	From *sessionstore.FileEntry `json:"from"`
	To   *sessionstore.FileEntry `json:"to"`
}

// cmdDiff prints the paths whose files differ between the workspaces as
// of two events, with what happened to each going from the first to the
// second.
func cmdDiff(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-json] <root> <session> <from> <to>")
	asJSON := fs.Bool("json", false, "print each change as one JSON object per line, with the file before and after")
	s, session, pos, status := c.openSession(ctx, fs, args, 4, 4, "session", "event")
	if s == nil {
		return status
	}
	defer s.Close()
	var ends [2]uuid.UUID
	for i, arg := range pos[2:] {
		id, err := resolveEvent(ctx, s, session, arg)
		if err != nil {
			return c.failf("session %s: %v", session, err)
		}
		ends[i] = id
	}
	from, to := ends[0], ends[1]
	// Diff names neither event in its error: Files is read for each
	// first, so that a missing one is named.
	for _, id := range ends {
		if _, err := s.Files(ctx, session, id); err != nil {
			return c.failf("session %s: event %s: %s", session, id, describe(err))
		}
	}
	changes, err := s.Diff(ctx, session, from, to)
	if err != nil {
		return c.failf("session %s: diff %s %s: %s", session, from, to, describe(err))
	}
	if len(changes) == 0 {
		c.warnf("no file differs between event %s and event %s", from, to)
		return exitOK
	}
	enc := json.NewEncoder(c.stdout)
	for _, ch := range changes {
		if *asJSON {
			out := changeJSON{Path: ch.Path, Op: ch.Op}
			if ch.Op != sessionstore.FileAdded {
				out.From = &ch.From
			}
			if ch.Op != sessionstore.FileDeleted {
				out.To = &ch.To
			}
			if err := enc.Encode(out); err != nil {
				return c.failf("encode change of %q: %v", ch.Path, err)
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%-8s %s\n", ch.Op, pathText(ch.Path))
	}
	return exitOK
}

// cmdRestore makes a directory hold the workspace as of an event
// (Store.Restore): the files written, the others removed, each listed.
// It opens the store read-only, as it reads the store only, unless
// -branch (without -dry-run) asks to move the active lane too.
func cmdRestore(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-dry-run] [-branch] [-ignore pattern]... [-gitignore] <root> <session> <event> <dir>")
	dry := fs.Bool("dry-run", false, "list what would be written and removed, and change nothing")
	branch := fs.Bool("branch", false, "also move the active lane to the event, so that the next append goes on from it (opens the session for writing)")
	var rules restoreRules
	fs.Var(&rules.ignore, "ignore", "leave the files of dir this `pattern` (a .gitignore line) matches alone, neither compared nor removed (repeatable): the rules the snapshots were taken with")
	fs.BoolVar(&rules.gitIgnore, "gitignore", false, "also read the .gitignore file of every directory of dir, as the snapshots did")
	pos, status, ok := c.parseArgs(fs, args, 4, 4, "session", "event", "")
	if !ok {
		return status
	}
	root, dir := pos[0], pos[3]
	writing := *branch && !*dry
	var s *sessionstore.Store
	var session, event uuid.UUID
	if writing {
		// Named through a read-only store, which refuses a directory that
		// holds no store (a writable Open would make one).
		ro, id, err := c.resolveForWriting(ctx, root, pos[1])
		if err != nil {
			return c.failf("%v", err)
		}
		session = id
		event, err = resolveEvent(ctx, ro, session, pos[2])
		ro.Close()
		if err != nil {
			return c.failf("session %s: %v", session, err)
		}
		if s, err = openWritable(root); err != nil {
			return c.failf("%v", err)
		}
	} else {
		var err error
		if s, err = c.openReadOnly(root); err != nil {
			return c.failf("%v", err)
		}
		if session, err = resolveSession(ctx, s, pos[1]); err != nil {
			s.Close()
			return c.failf("%v", err)
		}
		if event, err = resolveEvent(ctx, s, session, pos[2]); err != nil {
			s.Close()
			return c.failf("session %s: %v", session, err)
		}
	}
	status = c.restore(ctx, s, session, event, dir, *dry, *branch, rules)
	if err := s.Close(); err != nil && status == exitOK {
		return c.failf("close the store: %v", err)
	}
	return status
}

// restoreRules are restore's ignore rules (RestoreOptions.Ignore and
// GitIgnore).
type restoreRules struct {
	ignore    stringList
	gitIgnore bool
}

func (c *cmdEnv) restore(ctx context.Context, s *sessionstore.Store, session, event uuid.UUID, dir string, dry, branch bool, rules restoreRules) int {
	ws, err := s.Files(ctx, session, event)
	if err != nil {
		return c.failf("session %s: event %s: %s", session, event, describe(err))
	}
	if ws.Snapshot == uuid.Nil {
		// The workspace is empty: Restore would remove every file of dir.
		return c.failf("session %s: no workspace snapshot on the path to event %s, so there is nothing to restore (it would remove every file of %s); nothing changed", session, event, dir)
	}
	// RestoreOptions.Branch selects the event with Store.Branch, which
	// lives in this process's memory and is forgotten when the command
	// closes the store: the lane move below is its durable form.
	rep, err := s.Restore(ctx, session, event, dir, sessionstore.RestoreOptions{DryRun: dry, Ignore: rules.ignore, GitIgnore: rules.gitIgnore})
	if err != nil {
		return c.failf("session %s: restore event %s into %s: %s", session, event, dir, describe(err))
	}
	written, removed := "wrote", "removed"
	if dry {
		written, removed = "would write", "would remove"
	}
	width := max(len(written), len(removed))
	for _, p := range rep.Written {
		fmt.Fprintf(c.stdout, "%-*s  %s\n", width, written, pathText(p))
	}
	for _, p := range rep.Removed {
		fmt.Fprintf(c.stdout, "%-*s  %s\n", width, removed, pathText(p))
	}
	summary := fmt.Sprintf("%s %s, %s %s, %d unchanged", written, count(len(rep.Written), "file"), removed, count(len(rep.Removed), "file"), rep.Unchanged)
	if dry {
		fmt.Fprintf(c.stdout, "dry run, nothing changed: restoring event %s into %s %s\n", event, dir, summary)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "restored event %s into %s: %s\n", event, dir, summary)
	if !branch {
		return exitOK
	}
	lane, err := activeLane(ctx, s, session)
	if err == nil {
		err = s.MoveLane(ctx, session, lane, event)
	}
	if err != nil {
		return c.failf("session %s: the files are restored, but the next append's parent is not moved: %s", session, describe(err))
	}
	fmt.Fprintf(c.stdout, "moved lane %s to event %s: the next append goes on from it\n", lane, event)
	return exitOK
}

// activeLane returns the name of the session's active lane.
func activeLane(ctx context.Context, s *sessionstore.Store, session uuid.UUID) (string, error) {
	lanes, err := s.Lanes(ctx, session)
	if err != nil {
		return "", err
	}
	for _, l := range lanes {
		if l.Active {
			return l.Name, nil
		}
	}
	return "", errors.New("no lane is active")
}

// eventName names the event at, or the end of the active path for
// uuid.Nil, in a message.
func eventName(at uuid.UUID) string {
	if at == uuid.Nil {
		return "the active path's end"
	}
	return "event " + at.String()
}

// shortDigest is the first digestPrefix hex digits of a "sha256:<hex>"
// digest.
func shortDigest(d string) string {
	hex := strings.TrimPrefix(d, "sha256:")
	if len(hex) > digestPrefix {
		hex = hex[:digestPrefix]
	}
	return hex
}

// pathText is a workspace path as the last field of a line: as it is,
// or quoted when it holds a control character (a newline would start
// another line) or a leading or trailing space.
func pathText(p string) string {
	if strings.ContainsFunc(p, unicode.IsControl) || strings.TrimSpace(p) != p || strings.HasPrefix(p, `"`) {
		return strconv.Quote(p)
	}
	return p
}
