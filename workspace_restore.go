package sessionstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/workspace"
)

// restoreWorkers is how many files Restore writes at once.
const restoreWorkers = 32

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// DryRun changes nothing: the report lists what Restore would write
	// and remove.
	DryRun bool
	// Branch also selects the event as the parent of the next append
	// (Branch), once the files are written: conversation and code go
	// back together. Without it only the files change.
	Branch bool
	// Ignore and GitIgnore are rules as for SnapshotOptions: files of the
	// directory they ignore are left as they are, neither compared nor
	// removed. When neither is set, the rules the event's newest snapshot
	// was taken with apply (Workspace.Ignore), unless NoRules.
	Ignore    []string
	GitIgnore bool
	// NoRules ignores nothing, whatever the snapshot was taken with:
	// every file of dir the workspace lacks is removed.
	NoRules bool
	// NoSync leaves the files unsynced (a scratch directory a crash may
	// lose): faster, and a crash can leave a file empty or cut short. A
	// file the directory lacks is then written under its name, without a
	// temporary file.
	NoSync bool
}

// RestoreReport says what Restore changed (with DryRun: would change).
type RestoreReport struct {
	Written   []string // files created or replaced, sorted
	Removed   []string // files removed, sorted
	Unchanged int      // files that held the content and mode asked already
}

// Restore makes the directory dir hold the workspace as of event at of
// the session (Files; uuid.Nil is the end of the active path): each file
// of the workspace written with its content and permission bits unless
// it holds them already, and each regular file of dir the workspace
// lacks removed, except files the rules of o ignore (and a ".git"
// directory), which are left alone. So a SnapshotDir of dir with the same
// rules right after records the workspace as it is. Symbolic links are
// never followed: a link, or a file, where the workspace needs a
// directory is replaced by one, and a link where it needs a file is
// replaced by the file; other links are left alone. dir is created if
// missing.
//
// Safety: every change is inside dir. A file is written to a temporary
// file beside it, synced (unless NoSync), then renamed over its name:
// after a crash, each file is either as it was or as asked, never a mix,
// and a Restore run again finishes the job (it removes the temporary
// files a crash left). The directories changed are synced before it
// returns. Contents are verified against their digests before a file is
// written: a damaged blob is a *CorruptionError and that file is not
// touched.
//
// Errors: as Files and ReadFile; a directory that cannot be read or
// written; a name in dir that is not valid UTF-8 (ErrInvalidEvent); with
// Branch, as Branch.
func (s *Store) Restore(ctx context.Context, session, at uuid.UUID, dir string, o RestoreOptions) (RestoreReport, error) {
	var rep RestoreReport
	if err := s.begin(ctx); err != nil {
		return rep, err
	}
	defer s.end()
	if err := s.outsideStore(dir); err != nil {
		return rep, err
	}
	if o.Branch && !o.DryRun && s.opts.ReadOnly {
		return rep, fmt.Errorf("%w: Restore with Branch", ErrReadOnly) // before any file changes
	}
	ws, err := s.Files(ctx, session, at)
	if err != nil {
		return rep, err
	}
	fsys := s.opts.hostFS
	var made []string // the directories MkdirAll makes, dir first: their parents are synced
	if !o.DryRun {
		for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
			if _, err := fsys.Stat(d); !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
				break
			}
			made = append(made, d)
		}
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return rep, fmt.Errorf("sessionstore: restore: %w", err)
		}
	}
	ignore, gitIgnore := o.Ignore, o.GitIgnore
	switch {
	case o.NoRules:
		ignore, gitIgnore = nil, false
	case len(ignore) == 0 && !gitIgnore:
		ignore, gitIgnore = ws.Ignore, ws.GitIgnore
	}
	rules := rulesOf(ignore)
	if gitIgnore {
		// The .gitignore files of the workspace restored count as well as
		// the directory's: a file they ignored was never recorded, and a
		// rule dropped since must not remove it.
		for _, f := range ws.Files {
			if f.Path == ".gitignore" || strings.HasSuffix(f.Path, "/.gitignore") {
				b, err := s.ReadFile(ctx, session, f)
				if err != nil {
					return rep, err
				}
				base := ""
				if i := strings.LastIndexByte(f.Path, '/'); i > 0 {
					base = f.Path[:i]
				}
				rules.Add(base, string(b))
			}
		}
	}
	var found []workspace.File
	if _, err := fsys.Stat(dir); err == nil || !o.DryRun {
		found, _, err = workspace.Scan(ctx, fsys, dir, workspace.ScanOptions{Rules: rules, GitIgnore: gitIgnore, MaxFiles: max(workspace.DefaultMaxFiles, 2*len(ws.Files))})
		if err != nil {
			if errors.Is(err, workspace.ErrInvalidPath) {
				err = fmt.Errorf("%w: %w", ErrInvalidEvent, err)
			}
			return rep, err
		}
	}
	w := workspace.NewWriter(fsys, dir, !o.NoSync)
	have := make(map[string]workspace.File, len(found))
	var temps []string
	for _, f := range found {
		if isTemp(f.Path) {
			temps = append(temps, f.Path)
			continue
		}
		have[f.Path] = f
	}
	// What to write: files absent, or of another size or mode, or whose
	// content hashes to another digest.
	same := make([]bool, len(ws.Files))
	errs := make([]error, len(ws.Files))
	forEach(len(ws.Files), runtime.GOMAXPROCS(0), func(_, i int) {
		f := &ws.Files[i]
		h, ok := have[f.Path]
		if !ok || h.Size != f.Size || h.Mode != f.Mode {
			return
		}
		b, err := w.ReadFile(f.Path, f.Size)
		if err != nil {
			if !errors.Is(err, vfs.ErrTooLarge) && !errors.Is(err, fs.ErrNotExist) {
				errs[i] = fmt.Errorf("sessionstore: restore: %w", err)
			}
			return
		}
		same[i] = digestString(sha256.Sum256(b)) == f.Digest
	})
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	var writes []int
	for i := range ws.Files {
		if same[i] {
			rep.Unchanged++
		} else {
			writes = append(writes, i)
			rep.Written = append(rep.Written, ws.Files[i].Path)
		}
	}
	want := make(map[string]bool, len(ws.Files))
	for _, f := range ws.Files {
		want[f.Path] = true
	}
	for p := range have {
		if !want[p] {
			rep.Removed = append(rep.Removed, p)
		}
	}
	rep.Removed = append(rep.Removed, temps...)
	slices.Sort(rep.Removed)
	// A file that stands where the workspace needs a directory and that
	// Restore would not remove (the rules ignore it) is refused before
	// anything changes: Restore removes only what a snapshot would see.
	removed := make(map[string]bool, len(rep.Removed))
	for _, p := range rep.Removed {
		removed[p] = true
	}
	dirs := map[string]bool{}
	for _, i := range writes {
		p := ws.Files[i].Path
		for j := strings.LastIndexByte(p, '/'); j > 0; j = strings.LastIndexByte(p[:j], '/') {
			if dirs[p[:j]] {
				break
			}
			dirs[p[:j]] = true
		}
	}
	for d := range dirs {
		info, err := w.Stat(d)
		if err == nil && info.Mode().IsRegular() && !removed[d] {
			return rep, fmt.Errorf("%w: restore: %s is a file the rules ignore where the workspace has a directory; nothing was changed", ErrConflict, joinPath(dir, d))
		}
	}
	if o.DryRun {
		return rep, nil
	}
	// Removals first: a file that stands where the workspace has a
	// directory goes before the directory is made, and so do directories
	// the removals empty (a directory where the workspace has a file).
	for _, p := range rep.Removed {
		if err := w.Remove(p); err != nil {
			return rep, fmt.Errorf("sessionstore: restore: %w", err)
		}
	}
	for _, p := range rep.Removed {
		if i := strings.LastIndexByte(p, '/'); i > 0 {
			w.RemoveEmpty(p[:i])
		}
	}
	errs = make([]error, len(writes))
	// Many at once: each waits mostly on its file's create and sync, and
	// syncs in flight together share the file system's journal commits.
	forEach(len(writes), restoreWorkers, func(_, k int) {
		f := ws.Files[writes[k]]
		b, err := s.ReadFile(ctx, session, f)
		switch _, there := have[f.Path]; {
		case err != nil:
		case o.NoSync && !there:
			err = w.WriteNew(f.Path, b, f.Mode) // no temporary file: a crash may lose it anyway
		default:
			err = w.Write(f.Path, b, f.Mode)
		}
		errs[k] = err
	})
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	if err := w.Finish(); err != nil {
		return rep, err
	}
	if !o.NoSync {
		for _, d := range made {
			if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
				return rep, fmt.Errorf("sessionstore: restore: %w", err)
			}
		}
	}
	if o.Branch && ws.At != uuid.Nil {
		if err := s.Branch(ctx, session, ws.At); err != nil {
			return rep, err
		}
	}
	return rep, nil
}
