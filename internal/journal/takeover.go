package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TakeOver makes the session in dir, whose writer lock the caller just
// took, safe to write: when its JOURNAL marker names the journal of a
// dead owner (no process holds its lock), the session's records in that
// journal are made durable in their files (see settle) and the marker is
// made to name none, durably, before TakeOver returns. A marker that
// ReadMarker finds damaged (what a crash can leave of one being written)
// names any journal: every dead owner's journal under root but mine is
// applied to the session, then the marker is rewritten to name none. It
// returns the owner the marker names afterwards when that is mine, the
// caller's own journal ("" else, or when the marker names a live owner,
// whose own close syncs the session's files and forgets its records, or
// a journal file that is gone: closed by its owner, or replayed and
// removed). It reads a dead journal through dead (nil: no cache).
//
// A crash in the middle leaves the marker naming the dead journal (or
// damaged), and the journal in place, with some of the session's records
// written into their files: the next TakeOver (or Recover) applies them
// all again, which writes the same bytes. A journal it cannot read is a
// *CorruptionError, and the marker is left naming it.
func TakeOver(ctx context.Context, fsys vfs.FS, root, dir string, mine string, perm fs.FileMode, dead *DeadLogs) (string, error) {
	owner, err := ReadMarker(fsys, dir)
	var ce *CorruptionError
	if errors.As(err, &ce) {
		// A marker a crash damaged: whichever dead journal holds the
		// session's records, they go into its chunks.
		return "", takeOverAny(ctx, fsys, root, dir, mine, perm, dead)
	}
	if err != nil || owner == "" {
		return "", err
	}
	if owner == mine {
		return owner, nil
	}
	if _, err := fsys.Stat(WALPath(root, owner)); errors.Is(err, fs.ErrNotExist) {
		return "", nil // closed by its owner, or replayed and removed
	}
	r, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	applied, err := applyDead(ctx, fsys, root, owner, filepath.ToSlash(r)+"/", dead)
	if err != nil || !applied {
		return "", err
	}
	return "", WriteMarker(fsys, dir, "", perm)
}

// takeOverAny is TakeOver for a session whose marker cannot be read:
// every dead owner's journal under root is applied to the session, and
// the marker is made to name none.
func takeOverAny(ctx context.Context, fsys vfs.FS, root, dir, mine string, perm fs.FileMode, dead *DeadLogs) error {
	names, err := fsys.ReadDir(filepath.Join(root, Dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sessionstore: list journals: %w", err)
	}
	r, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		owner, ok := strings.CutSuffix(name, ".wal")
		if !ok || !isOwnerID(owner) || owner == mine {
			continue
		}
		if _, err := applyDead(ctx, fsys, root, owner, filepath.ToSlash(r)+"/", dead); err != nil {
			return err
		}
	}
	return WriteMarker(fsys, dir, "", perm)
}

// applyDead applies the records under prefix of owner's journal, if its
// owner is dead, holding its claim: applied reports whether it did (or
// found it had nothing to), false when the owner is alive or its journal
// is gone. It reads the journal through dead (nil: no cache).
func applyDead(ctx context.Context, fsys vfs.FS, root, owner, prefix string, dead *DeadLogs) (applied bool, err error) {
	c, err := Take(ctx, fsys, root, owner)
	if errors.Is(err, ErrOwnerAlive) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sessionstore: claim journal %s: %w", WALPath(root, owner), err)
	}
	defer c.Release()
	log, err := dead.read(fsys, root, c, owner)
	if errors.Is(err, fs.ErrNotExist) {
		return false, c.Remove() // removed meanwhile: only its lock files were left
	}
	if errors.Is(err, ErrNoHeader) && allZeros(fsys, WALPath(root, owner)) {
		// What a crash during Create leaves (nothing, or zeros, and no
		// header yet): a session's marker may already name the owner
		// (its Store marks sessions while the journal is being made),
		// but no Commit used a journal before its header was durable
		// (Create), so there is nothing to apply. A journal with other
		// bytes and no valid header was used and is damaged: the error.
		return true, c.Remove()
	}
	if err != nil {
		return false, err
	}
	if err := settle(fsys, root, log, prefix); err != nil {
		return false, fmt.Errorf("sessionstore: replay journal %s into %s: %w", WALPath(root, owner), prefix, err)
	}
	return true, nil
}

// DeadLogs keeps the dead journal a take-over read last, so that taking
// over the many sessions one dead writer left reads its journal once, not
// once a session (a 64 MiB journal read again for each of a thousand
// sessions opened after a crash). A dead owner's journal never changes:
// only a replayer holding its claim removes it, and owner ids are never
// reused, so the log read stays right for as long as the file exists,
// which a take-over checks under the claim. One log is kept: a crash
// leaves one dead journal per process that was writing. Its zero value
// is empty and ready; it is safe for concurrent use.
type DeadLogs struct {
	mu    sync.Mutex
	owner string
	log   *Log
	reads int // journal reads
}

// Reads returns how many times a journal file was read through d.
func (d *DeadLogs) Reads() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads
}

// read returns the log of owner's journal under root, whose claim c the
// caller holds; fs.ErrNotExist when the file is gone. A nil d reads every
// time.
func (d *DeadLogs) read(fsys vfs.FS, root string, c *Claim, owner string) (*Log, error) {
	if d == nil {
		return c.Read()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owner == owner && d.log != nil {
		if _, err := fsys.Stat(WALPath(root, owner)); err != nil {
			d.owner, d.log = "", nil
			return nil, err
		}
		return d.log, nil
	}
	log, err := c.Read()
	d.reads++
	if err != nil {
		return nil, err
	}
	d.owner, d.log = owner, log
	return log, nil
}

// forget drops owner's log: its journal was removed.
func (d *DeadLogs) forget(owner string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owner == owner {
		d.owner, d.log = "", nil
	}
}

// settle makes the records under prefix of a dead owner's journal
// durable in their files. In another boot than the owner's (the machine
// went down with it), the page cache is gone: the records are written
// into their files and synced (Log.Apply). In the owner's boot (the
// process died, the machine did not), the files hold every record the
// owner acknowledged, written before the acknowledgement: they are only
// synced, and a record the owner made durable in the journal but had not
// written into its file yet, unacknowledged, stays out, as a reader
// beside it saw the session.
func settle(fsys vfs.FS, root string, log *Log, prefix string) error {
	if id := fsys.BootID(); id == "" || log.Boot != BootHash(id) {
		_, err := log.Apply(fsys, root, prefix)
		return err
	}
	seen := map[string]bool{}
	for _, e := range log.Under(prefix) {
		if seen[e.Path] {
			continue
		}
		seen[e.Path] = true
		if err := durable.SyncFile(fsys, filepath.Join(root, filepath.FromSlash(e.Path))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Recover claims every dead owner's journal under root, applies it to
// each session whose JOURNAL marker still names it (as TakeOver does,
// then the marker is made to name none), and removes it: what a writing
// process does once before it commits through a journal of its own. A
// journal it cannot claim (its owner alive, or another process replaying
// it) is left; one it cannot read or apply is left and logged to log (the
// sessions it covers report it when taken over). A crash in the middle
// leaves the journal and the markers still naming it, which the next
// Recover or TakeOver applies again. It returns an error only when the
// journal directory cannot be listed.
func Recover(ctx context.Context, fsys vfs.FS, root string, perm fs.FileMode, log *slog.Logger, dead *DeadLogs) error {
	names, err := fsys.ReadDir(filepath.Join(root, Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessionstore: list journals: %w", err)
	}
	for _, name := range names {
		owner, ok := strings.CutSuffix(name, ".wal")
		if !ok || !isOwnerID(owner) {
			continue
		}
		if err := recoverOne(ctx, fsys, root, owner, perm, dead); err != nil {
			log.Error("sessionstore: dead journal left for its sessions to replay", "path", WALPath(root, owner), "err", err)
		}
	}
	return nil
}

// recoverOne is Recover for one journal.
func recoverOne(ctx context.Context, fsys vfs.FS, root, owner string, perm fs.FileMode, dead *DeadLogs) error {
	c, err := Take(ctx, fsys, root, owner)
	if errors.Is(err, ErrOwnerAlive) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Release()
	defer dead.forget(owner)
	jl, err := dead.read(fsys, root, c, owner)
	if errors.Is(err, fs.ErrNotExist) {
		return c.Remove()
	}
	if err != nil {
		return err
	}
	// The sessions the log covers, in order of first record.
	var prefixes []string
	seen := map[string]bool{}
	for _, e := range jl.Entries {
		p, ok := sessionOfPath(e.Path)
		if ok && !seen[p] {
			seen[p] = true
			prefixes = append(prefixes, p)
		}
	}
	for _, p := range prefixes {
		dir := filepath.Join(root, filepath.FromSlash(p))
		named, err := ReadMarker(fsys, dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if named != owner {
			continue // taken over since, or deleted
		}
		if err := settle(fsys, root, jl, p); err != nil {
			return err
		}
		if err := WriteMarker(fsys, dir, "", perm); err != nil {
			return err
		}
	}
	return c.Remove()
}

// sessionOfPath returns the session prefix ("sessions/<id>/") of a
// journal record's path.
func sessionOfPath(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, layout.SessionsDir+"/")
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", false
	}
	return p[:len(layout.SessionsDir)+1+i+1], true
}

// allZeros reports whether the file at path holds zero bytes only (or
// none); false when it cannot be read.
func allZeros(fsys vfs.FS, path string) bool {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		off += int64(n)
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}
