package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
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
// the entries it skipped. Names that are not valid UTF-8 are an error
// wrapping ErrInvalidPath (a snapshot could not restore them under their
// name); a directory that cannot be read is an error naming it.
func Scan(ctx context.Context, fsys vfs.FS, dir string, o ScanOptions) ([]File, []Skipped, error) {
	fsys = vfs.Confine(fsys, dir)
	rules := o.Rules
	if o.GitIgnore {
		rules = rules.clone()
	}
	limit := o.MaxFiles
	if limit <= 0 {
		limit = DefaultMaxFiles
	}
	var files []File
	var skipped []Skipped
	stack := []string{""}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		abs := filepath.Join(dir, filepath.FromSlash(rel))
		names, err := fsys.ReadDir(abs)
		if err != nil {
			return nil, nil, fmt.Errorf("workspace: read directory %s: %w", abs, err)
		}
		if o.GitIgnore && slices.Contains(names, ".gitignore") {
			p := join(rel, ".gitignore")
			b, err := vfs.ReadFileLimit(fsys, filepath.Join(dir, filepath.FromSlash(p)), MaxIgnoreFile)
			switch {
			case err == nil:
				rules.Add(rel, string(b))
			case errors.Is(err, vfs.ErrFileType): // a link or no file: no rules
			default:
				return nil, nil, fmt.Errorf("workspace: read %s: %w", p, err)
			}
		}
		for _, name := range names {
			p := join(rel, name)
			if !utf8.ValidString(name) {
				return nil, nil, fmt.Errorf("workspace: %w %q in %s: not valid UTF-8", ErrInvalidPath, name, abs)
			}
			if err := CheckPath(p); err != nil {
				return nil, nil, fmt.Errorf("workspace: %w", err)
			}
			info, err := fsys.Stat(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since the listing
				}
				return nil, nil, fmt.Errorf("workspace: %w", err)
			}
			switch t := info.Mode().Type(); {
			case t == fs.ModeDir:
				if name == GitDir || rules.Ignored(p, true) {
					continue
				}
				stack = append(stack, p)
			case t == 0:
				if rules.Ignored(p, false) {
					continue
				}
				if len(files) >= limit {
					return nil, nil, fmt.Errorf("workspace: %s: %w (%d)", dir, ErrTooMany, limit)
				}
				files = append(files, File{Path: p, Size: info.Size(), Mode: info.Mode().Perm(), ModTime: info.ModTime().UnixNano()})
			default:
				if rules.Ignored(p, false) {
					continue
				}
				skipped = append(skipped, Skipped{Path: p, Reason: "not a regular file (" + t.String() + ")"})
			}
		}
	}
	slices.SortFunc(files, func(a, b File) int { return compare(a.Path, b.Path) })
	return files, skipped, nil
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
