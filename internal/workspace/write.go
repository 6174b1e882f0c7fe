package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TempMark is in the name of every temporary file a Writer makes
// (".<name><TempMark><random>"); Scan's callers may leave such names out.
const TempMark = ".sessionstore-tmp-"

// Writer writes files into a directory, each through a temporary file
// renamed over its name, and removes them. Its methods may be called
// from many goroutines at once for distinct paths.
type Writer struct {
	fsys vfs.FS
	dir  string
	sync bool

	mu      sync.Mutex
	changed map[string]bool // directories whose entries changed ("" the root)
	gone    map[string]bool // directories RemoveEmpty removed (and not made again)
	made    map[string]bool // directories known to exist as directories
}

// NewWriter returns a Writer into dir through fsys confined to it; with
// sync, each file is synced before its rename and Finish syncs every
// directory whose entries changed.
func NewWriter(fsys vfs.FS, dir string, sync bool) *Writer {
	return &Writer{fsys: vfs.Confine(fsys, dir), dir: dir, sync: sync, changed: map[string]bool{}, gone: map[string]bool{}, made: map[string]bool{"": true}}
}

func (w *Writer) abs(p string) string { return filepath.Join(w.dir, filepath.FromSlash(p)) }

// Stat describes the entry at p, not following a link.
func (w *Writer) Stat(p string) (fs.FileInfo, error) { return w.fsys.Stat(w.abs(p)) }

// ReadFile reads the regular file at p, refusing more than limit bytes.
func (w *Writer) ReadFile(p string, limit int64) ([]byte, error) {
	return vfs.ReadFileLimit(w.fsys, w.abs(p), limit)
}

// ensureDir makes the directory d (and its parents) exist as
// directories, removing what stands in the way: a file or a link at a
// name the tree needs as a directory (the link itself, never what it
// names).
func (w *Writer) ensureDir(d string) error {
	var chain []string // d and its parents not yet known, innermost first
	w.mu.Lock()
	for !w.made[d] {
		chain = append(chain, d)
		d = parentOf(d)
	}
	w.mu.Unlock()
	for i := len(chain) - 1; i >= 0; i-- {
		if err := w.makeDir(chain[i]); err != nil {
			return err
		}
	}
	return nil
}

// makeDir makes d a directory, its parent being one.
func (w *Writer) makeDir(d string) error {
	info, err := w.fsys.Stat(w.abs(d))
	switch {
	case err == nil && info.IsDir():
	case err == nil:
		if err := w.fsys.Remove(w.abs(d)); err != nil {
			return fmt.Errorf("workspace: replace %s with a directory: %w", d, err)
		}
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := w.fsys.MkdirAll(w.abs(d), 0o755); err != nil {
			return fmt.Errorf("workspace: make directory %s: %w", d, err)
		}
		w.note(parentOf(d))
	default:
		return fmt.Errorf("workspace: %w", err)
	}
	w.mu.Lock()
	w.made[d] = true
	delete(w.gone, d)
	w.mu.Unlock()
	return nil
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func (w *Writer) note(d string) {
	w.mu.Lock()
	w.changed[d] = true
	w.mu.Unlock()
}

// Write makes p a regular file holding data with permission perm: a
// temporary file beside it, written (and synced, with sync), renamed
// over p. A link at p is replaced, not followed; a directory at p is
// removed if empty, else an error.
func (w *Writer) Write(p string, data []byte, perm fs.FileMode) error {
	if err := CheckPath(p); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	d := parentOf(p)
	if err := w.ensureDir(d); err != nil {
		return err
	}
	if info, err := w.fsys.Stat(w.abs(p)); err == nil && info.IsDir() {
		if err := w.fsys.Remove(w.abs(p)); err != nil {
			return fmt.Errorf("workspace: replace directory %s with a file: %w", p, err)
		}
	}
	tmp := join(d, TempName(path.Base(p)))
	f, err := w.fsys.OpenFile(w.abs(tmp), os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm&fs.ModePerm)
	if err != nil {
		return fmt.Errorf("workspace: write %s: %w", p, err)
	}
	err = chmod(f, perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && w.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.fsys.Rename(w.abs(tmp), w.abs(p))
	}
	if err != nil {
		_ = w.fsys.Remove(w.abs(tmp))
		return fmt.Errorf("workspace: write %s: %w", p, err)
	}
	w.note(d)
	return nil
}

// WriteNew makes p a new regular file holding data, written in place
// under its name: for a file that does not exist and a caller that can
// lose it (no sync: a crash may leave it empty or cut short). A name
// that exists by now is written as Write writes it.
func (w *Writer) WriteNew(p string, data []byte, perm fs.FileMode) error {
	if w.sync {
		return w.Write(p, data, perm)
	}
	if err := CheckPath(p); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	d := parentOf(p)
	if err := w.ensureDir(d); err != nil {
		return err
	}
	f, err := w.fsys.OpenFile(w.abs(p), os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm&fs.ModePerm)
	if errors.Is(err, fs.ErrExist) {
		return w.Write(p, data, perm)
	}
	if err != nil {
		return fmt.Errorf("workspace: write %s: %w", p, err)
	}
	err = chmod(f, perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("workspace: write %s: %w", p, err)
	}
	w.note(d)
	return nil
}

// chmod gives f the permission bits perm whatever the umask left, where
// the file system's files can change their mode (the operating
// system's; MemFS keeps what OpenFile was given).
func chmod(f vfs.File, perm fs.FileMode) error {
	if c, ok := f.(interface{ Chmod(fs.FileMode) error }); ok {
		return c.Chmod(perm & fs.ModePerm)
	}
	return nil
}

// maxTempBase is the most bytes of a file's name its temporary name
// repeats: file systems allow 255 bytes a name.
const maxTempBase = 200

// TempName returns a new temporary name for a file named base, in the
// form IsTemp recognizes: "." + at most 200 bytes of base + TempMark +
// 16 hex digits.
func TempName(base string) string {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	return "." + base + TempMark + hex.EncodeToString(r[:])
}

// IsTemp reports whether the last element of p has the form of
// TempName's names.
func IsTemp(p string) bool {
	base := p[strings.LastIndexByte(p, '/')+1:]
	i := strings.LastIndex(base, TempMark)
	if i < 1 || base[0] != '.' || len(base)-i-len(TempMark) != 16 || i-1 > maxTempBase {
		return false
	}
	for _, c := range base[i+len(TempMark):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Remove removes the file (or link, or empty directory) at p; one that
// is gone already is no error.
func (w *Writer) Remove(p string) error {
	if err := CheckPath(p); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := w.fsys.Remove(w.abs(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("workspace: remove %s: %w", p, err)
	}
	w.note(parentOf(p))
	return nil
}

// RemoveEmpty removes the directory d and its parents below the root
// while they are empty.
func (w *Writer) RemoveEmpty(d string) {
	for d != "" {
		names, err := w.fsys.ReadDir(w.abs(d))
		if err != nil || len(names) > 0 {
			return
		}
		if w.fsys.Remove(w.abs(d)) != nil {
			return
		}
		w.mu.Lock()
		delete(w.made, d)
		w.gone[d] = true
		w.mu.Unlock()
		d = parentOf(d)
		w.note(d)
	}
}

// Finish syncs, with sync, every directory whose entries changed.
func (w *Writer) Finish() error {
	if !w.sync {
		return nil
	}
	w.mu.Lock()
	dirs := make([]string, 0, len(w.changed))
	for d := range w.changed {
		if !w.gone[d] { // its removal is in its parent's entries
			dirs = append(dirs, d)
		}
	}
	w.mu.Unlock()
	for _, d := range dirs {
		if err := w.fsys.SyncDir(w.abs(d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("workspace: sync directory %s: %w", d, err)
		}
	}
	return nil
}
