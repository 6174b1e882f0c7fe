package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// File is a regular file Scan found.
type File struct {
	Path    string      // CheckPath's form
	Size    int64       // bytes
	Mode    fs.FileMode // permission bits
	ModTime int64       // modification time, Unix nanoseconds
}

// Skipped is an entry Scan found and did not take: a symbolic link, a
// device, a socket, a named pipe.
type Skipped struct {
	Path   string
	Reason string
}

// ScanOptions are Scan's rules and limits.
type ScanOptions struct {
	Rules     *Rules // nil: none
	GitIgnore bool   // also read the .gitignore file of every directory walked
	// MaxFiles is the most files Scan returns; one more is ErrTooMany.
	// 0 means DefaultMaxFiles.
	MaxFiles int
}

// DefaultMaxFiles is ScanOptions.MaxFiles when it is 0.
const DefaultMaxFiles = 1_000_000

// MaxIgnoreFile is the largest .gitignore file Scan reads.
const MaxIgnoreFile = 1 << 20

// ErrTooMany is the cause of a Scan stopped at ScanOptions.MaxFiles.
var ErrTooMany = errors.New("workspace has more files than the limit")

// GitDir is the name of the directory Scan never walks: git's own store,
// not part of the work tree it describes.
const GitDir = ".git"

// Scan walks the directory dir through fsys confined to it and returns
// its regular files that the rules do not ignore, sorted by path, and
// the entries it skipped, sorted too. Names that are not valid UTF-8 are
// an error wrapping ErrInvalidPath (a snapshot could not restore them
// under their name); a directory that cannot be read is an error naming
// it. Directories are read on a few goroutines at once (the stats of a
// large tree are most of the time a snapshot takes), from a shared stack:
// memory grows with the entries found, never with the depth.
func Scan(ctx context.Context, fsys vfs.FS, dir string, o ScanOptions) ([]File, []Skipped, error) {
	sc := &scanner{ctx: ctx, fsys: vfs.Confine(fsys, dir), dir: dir, git: o.GitIgnore, limit: o.MaxFiles}
	if sc.limit <= 0 {
		sc.limit = DefaultMaxFiles
	}
	sc.cond = sync.NewCond(&sc.mu)
	sc.stack = []pending{{rel: "", rules: o.Rules}}
	var wg sync.WaitGroup
	for range scanWorkers {
		wg.Go(sc.work)
	}
	wg.Wait()
	if sc.err != nil {
		return nil, nil, sc.err
	}
	slices.SortFunc(sc.files, func(a, b File) int { return compare(a.Path, b.Path) })
	slices.SortFunc(sc.skipped, func(a, b Skipped) int { return compare(a.Path, b.Path) })
	return sc.files, sc.skipped, nil
}

// scanWorkers is how many directories Scan reads at once.
const scanWorkers = 8

// pending is a directory to read, with the rules of its subtree.
type pending struct {
	rel   string
	rules *Rules
}

type scanner struct {
	ctx   context.Context
	fsys  vfs.FS
	dir   string
	git   bool
	limit int

	mu      sync.Mutex
	cond    *sync.Cond
	stack   []pending
	busy    int // directories being read
	err     error
	files   []File
	skipped []Skipped
}

// work reads directories from the stack until none is left or one fails.
func (sc *scanner) work() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for {
		for len(sc.stack) == 0 && sc.busy > 0 && sc.err == nil {
			sc.cond.Wait()
		}
		if sc.err != nil || len(sc.stack) == 0 {
			sc.cond.Broadcast()
			return
		}
		d := sc.stack[len(sc.stack)-1]
		sc.stack = sc.stack[:len(sc.stack)-1]
		sc.busy++
		sc.mu.Unlock()
		files, skipped, dirs, err := sc.read(d)
		sc.mu.Lock()
		sc.busy--
		switch {
		case sc.err != nil:
		case err != nil:
			sc.err = err
		case len(sc.files)+len(files) > sc.limit:
			sc.err = fmt.Errorf("workspace: %s: %w (%d)", sc.dir, ErrTooMany, sc.limit)
		default:
			sc.files = append(sc.files, files...)
			sc.skipped = append(sc.skipped, skipped...)
			sc.stack = append(sc.stack, dirs...)
		}
		sc.cond.Broadcast()
	}
}

// read reads one directory: its files, what it skipped, its
// subdirectories to read.
func (sc *scanner) read(d pending) (files []File, skipped []Skipped, dirs []pending, err error) {
	if err := sc.ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	abs := filepath.Join(sc.dir, filepath.FromSlash(d.rel))
	names, err := sc.fsys.ReadDir(abs)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("workspace: read directory %s: %w", abs, err)
	}
	rules := d.rules
	if sc.git && slices.Contains(names, ".gitignore") {
		p := join(d.rel, ".gitignore")
		b, err := vfs.ReadFileLimit(sc.fsys, filepath.Join(sc.dir, filepath.FromSlash(p)), MaxIgnoreFile)
		switch {
		case err == nil:
			rules = rules.child(d.rel, string(b))
		case errors.Is(err, vfs.ErrFileType): // a link or no file: no rules
		default:
			return nil, nil, nil, fmt.Errorf("workspace: read %s: %w", p, err)
		}
	}
	for _, name := range names {
		p := join(d.rel, name)
		if !utf8.ValidString(name) {
			return nil, nil, nil, fmt.Errorf("workspace: %w %q in %s: not valid UTF-8", ErrInvalidPath, name, abs)
		}
		if err := CheckPath(p); err != nil {
			return nil, nil, nil, fmt.Errorf("workspace: %w", err)
		}
		info, err := sc.fsys.Stat(filepath.Join(sc.dir, filepath.FromSlash(p)))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			return nil, nil, nil, fmt.Errorf("workspace: %w", err)
		}
		switch t := info.Mode().Type(); {
		case t == fs.ModeDir:
			if name == GitDir || rules.Ignored(p, true) {
				continue
			}
			dirs = append(dirs, pending{rel: p, rules: rules})
		case t == 0:
			if rules.Ignored(p, false) {
				continue
			}
			files = append(files, File{Path: p, Size: info.Size(), Mode: info.Mode().Perm(), ModTime: info.ModTime().UnixNano()})
		default:
			if rules.Ignored(p, false) {
				continue
			}
			skipped = append(skipped, Skipped{Path: p, Reason: "not a regular file (" + t.String() + ")"})
		}
	}
	return files, skipped, dirs, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// join joins a directory path and a name, "" being the root.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
