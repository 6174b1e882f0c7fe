package main

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// cmdKeys rotates the keys of an encrypted store (docs/encryption.md),
// with the keys SESSIONSTORE_KEY_FILE or SESSIONSTORE_KEYS give it:
//
//	keys <root> rewrap                  every session's data key wrapped under the
//	                                    current key-encryption key (Store.Rewrap)
//	keys <root> reencrypt <session>...  those sessions sealed again under a new
//	                                    data key (Store.Reencrypt)
//
// It opens the store for writing; a session another process holds fails
// with its error and the others go on.
func cmdKeys(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("<root> rewrap | <root> reencrypt <session>...")
	pos, status, ok := c.parseArgs(fs, args, 2, -1)
	if !ok {
		return status
	}
	root, op, named := pos[0], pos[1], pos[2:]
	switch {
	case op != "rewrap" && op != "reencrypt":
		return c.usagef(fs, "%q: want rewrap or reencrypt", op)
	case op == "rewrap" && len(named) > 0:
		return c.usagef(fs, "rewrap takes every session: name none")
	case op == "reencrypt" && len(named) == 0:
		return c.usagef(fs, "name a session to re-encrypt")
	}
	for _, arg := range named {
		if !wellFormedID(arg) {
			return c.usagef(fs, "session %q is neither an id nor an id prefix (hex digits, and dashes where the id has them)", arg)
		}
	}
	s, err := openWritable(root)
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()
	status = exitOK
	if op == "rewrap" {
		rep, err := s.Rewrap(ctx)
		if err != nil {
			return c.failf("rewrap: %s", describe(err))
		}
		for _, sk := range rep.Skipped {
			c.warnf("session %s: not rewrapped: %s", sk.Session, describe(sk.Err))
			status = exitFail
		}
		fmt.Fprintf(c.stdout, "rewrapped %d key records; %d were under the current key already; %d skipped\n", rep.Rewrapped, rep.Current, len(rep.Skipped))
	} else {
		var ids []uuid.UUID
		for _, arg := range named {
			id, err := resolveSession(ctx, s, arg)
			if err != nil {
				return c.failf("%v", err)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			if err := s.Reencrypt(ctx, id); err != nil {
				c.warnf("session %s: not re-encrypted (it opens as before; run the command again to finish): %s", id, describe(err))
				status = exitFail
				continue
			}
			fmt.Fprintf(c.stdout, "%s: sealed again under a new data key\n", id)
		}
	}
	if err := s.Close(); err != nil {
		return c.failf("close the store: %v", err)
	}
	return status
}
