package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// cmdUpgrade moves older sessions to format 3 (Store.Upgrade): the
// named ones, or every session with -all. With -compression it converts
// the root's chunks to that mode (ConvertCompression), after the upgrades.
// It opens the store for writing: each session is locked while it is
// rewritten, so a session another process holds fails with its error and
// the others go on.
func cmdUpgrade(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-all] [-compression zstd|none] <root> [session...]")
	all := fs.Bool("all", false, "upgrade every session of the root")
	mode := fs.String("compression", "", "then convert the root's chunks to this compression mode: zstd or none")
	pos, status, ok := c.parseArgs(fs, args, 1, -1, "session")
	if !ok {
		return status
	}
	root, named := pos[0], pos[1:]
	switch {
	case *mode != "" && *mode != sessionstore.CompressionZstd && *mode != sessionstore.CompressionNone:
		return c.usagef(fs, "-compression %q: want %q or %q", *mode, sessionstore.CompressionZstd, sessionstore.CompressionNone)
	case *all && len(named) > 0:
		return c.usagef(fs, "-all upgrades every session: name none with it")
	case !*all && len(named) == 0 && *mode == "":
		return c.usagef(fs, "name a session to upgrade, or give -all or -compression")
	}
	status = exitOK
	if *all || len(named) > 0 {
		status = c.upgradeSessions(ctx, root, named, *all)
	}
	if *mode != "" {
		if err := sessionstore.ConvertCompression(ctx, root, &sessionstore.Options{Compression: *mode}); err != nil {
			if errors.Is(err, sessionstore.ErrNoStore) {
				return c.failf("%v", openError(root, err, " for writing"))
			}
			return c.failf("convert the root to compression %s: %s (the root keeps its mode; run the command again to finish)", *mode, describe(err))
		}
		fmt.Fprintf(c.stdout, "root %s: chunks stored with compression %s\n", root, *mode)
	}
	return status
}

// upgradeSessions upgrades the named sessions, or every one with all,
// reporting each, and returns the exit status.
func (c *cmdEnv) upgradeSessions(ctx context.Context, root string, named []string, all bool) int {
	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()
	status := exitOK
	var ids []uuid.UUID
	if all {
		metas, err := s.List(ctx)
		var listErr *sessionstore.ListError
		if err != nil && !errors.As(err, &listErr) {
			return c.failf("list the sessions: %s", describe(err))
		}
		for _, m := range metas {
			ids = append(ids, m.ID)
		}
		if listErr != nil {
			for _, u := range listErr.Unreadable {
				c.warnf("session %s: not upgraded: %s: %s", u.ID, u.Path, describe(u.Err))
				status = exitFail
			}
		}
	} else {
		for _, arg := range named {
			id, err := resolveSession(ctx, s, arg)
			if err != nil {
				return c.failf("%v", err)
			}
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		before := sessionFormat(root, id)
		if err := s.Upgrade(ctx, id); err != nil {
			c.warnf("session %s: not upgraded, left as it was: %s", id, describe(err))
			status = exitFail
			continue
		}
		after := sessionFormat(root, id)
		switch {
		case before > 0 && after > before:
			fmt.Fprintf(c.stdout, "%s: upgraded from format %d to format %d\n", id, before, after)
		case before > 0 && after == before:
			fmt.Fprintf(c.stdout, "%s: format %d already, nothing to do\n", id, before)
		default:
			fmt.Fprintf(c.stdout, "%s: format %d\n", id, after)
		}
	}
	if err := s.Close(); err != nil {
		return c.failf("close the store: %v", err)
	}
	return status
}

// sessionFormat returns the format a session's session.json records, or
// 0 if it cannot tell; for the command's report only. It reads a regular
// file only (not a link, a FIFO or a device) and no more than
// session.json's largest size, 1 MiB.
func sessionFormat(root string, id uuid.UUID) int {
	path := filepath.Join(root, "sessions", id.String(), "session.json")
	if info, err := os.Lstat(path); err != nil || !info.Mode().IsRegular() {
		return 0
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return 0
	}
	var rec struct {
		Format int `json:"format"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return 0
	}
	return rec.Format
}
