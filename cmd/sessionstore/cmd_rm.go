package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessionstore/sessionstore"
)

// cmdRm deletes a session (Store.Delete): its directory is moved to the
// root's trash under one rename, so a crash leaves it whole or gone, and
// kept there for the trash's grace period (undelete brings it back, purge
// removes it at once). It
// opens the store for writing; a session another process holds open for
// writing is refused, as is one that forks read from.
func cmdRm(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("<root> <session>")
	pos, status, ok := c.parseArgs(fs, args, 2, 2, "session")
	if !ok {
		return status
	}
	root := pos[0]
	ro, session, err := c.resolveForWriting(ctx, root, pos[1])
	if err != nil {
		return c.failf("%v", err)
	}
	meta, merr := ro.Meta(ctx, session)
	ro.Close()
	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	err = s.Delete(ctx, session)
	var kept *sessionstore.TrashItem
	if err == nil {
		if items, terr := s.Trash(ctx); terr == nil {
			for _, it := range items {
				if it.Meta.ID == session {
					kept = &it
					break
				}
			}
		}
	}
	closeErr := s.Close()
	switch {
	case errors.Is(err, sessionstore.ErrHasForks):
		return c.failf("session %s: %v (remove the forks first)", session, err)
	case err != nil:
		return c.failf("session %s: %s", session, describe(err))
	}
	name := ""
	if merr == nil && meta.Name != "" {
		name = fmt.Sprintf(" (%q)", meta.Name)
	}
	if kept != nil {
		fmt.Fprintf(c.stdout, "%s%s: moved to the trash until %s (sessionstore undelete %s %s brings it back)\n",
			session, name, stamp(kept.PurgeAt), root, session)
	} else {
		fmt.Fprintf(c.stdout, "%s%s: deleted\n", session, name)
	}
	if closeErr != nil {
		return c.failf("close the store: %v", closeErr)
	}
	return exitOK
}
