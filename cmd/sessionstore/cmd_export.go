package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/export"
)

// exportSynopsis is the export command's usage line.
const exportSynopsis = "[-format jsonl|md] [-scope tree|path|context] [-blobs inline|<dir>] [-full] [-o file] <root> <session>  (or -store <root> <session>)"

// cmdExport writes a session out of the store: as JSON lines (the whole
// tree, the active path or the context Load gives; the format of package
// export) or as a Markdown transcript of the active path. It opens the
// store read-only. With -o the output goes to a temporary file beside
// file, synced and renamed to it once whole, so a failed export leaves no
// half-written file. The file gets the permissions of the session's own
// files (session.json's: 0600 unless the store was opened with another
// Options.FileMode), less the umask: a transcript is never more open than
// the store it comes from, nor than the user's umask allows.
func cmdExport(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags(exportSynopsis)
	format := fs.String("format", "jsonl", "output format: jsonl or md (a Markdown transcript)")
	scope := fs.String("scope", "", "events to export: tree (every branch), path (the active path: root to where the next append goes, past compactions) or context (what Load returns); default tree for jsonl, path for md")
	blobs := fs.String("blobs", "inline", "records stored as blobs: inline in their lines, or a directory to write them to as sha256-<hex> files (jsonl only)")
	full := fs.Bool("full", false, "md: show every tool output whole instead of cutting long ones")
	outFile := fs.String("o", "", "write to this file instead of stdout, replacing it whole; it gets the session's file permissions (0600 by default) less the umask")
	store := fs.String("store", "", "the store's directory, instead of the <root> argument")
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	if *store != "" {
		pos = append([]string{*store}, pos...)
	}
	switch {
	case len(pos) < 2:
		return c.usagef(fs, "missing arguments")
	case len(pos) > 2:
		return c.usagef(fs, "too many arguments: %s", pos[2:])
	case !wellFormedID(pos[1]):
		return c.usagef(fs, "session %q is neither an id nor an id prefix (hex digits, and dashes where the id has them)", pos[1])
	}
	opts := export.Options{Full: *full}
	switch *scope {
	case "":
	case "tree":
		opts.Scope = export.Tree
	case "path":
		opts.Scope = export.ActivePath
	case "context":
		opts.Scope = export.Context
	default:
		return c.usagef(fs, "-scope %q: not tree, path or context", *scope)
	}
	switch *format {
	case "jsonl":
		if *blobs != "inline" {
			if *blobs == "" {
				return c.usagef(fs, "-blobs: inline or a directory")
			}
			opts.BlobDir = *blobs
		}
		if *full {
			return c.usagef(fs, "-full is for -format md")
		}
	case "md":
		if opts.Scope == export.Tree {
			return c.usagef(fs, "-format md shows one path: -scope path or context")
		}
		if *blobs != "inline" {
			return c.usagef(fs, "-blobs is for -format jsonl (a transcript shows every record)")
		}
	default:
		return c.usagef(fs, "-format %q: not jsonl or md", *format)
	}

	s, err := c.openReadOnly(pos[0])
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()
	session, err := resolveSession(ctx, s, pos[1])
	if err != nil {
		return c.failf("%v", err)
	}
	run := func(ctx context.Context, w io.Writer) (export.Stats, error) {
		if *format == "md" {
			return export.Markdown(ctx, w, s, session, opts)
		}
		return export.JSONL(ctx, w, s, session, opts)
	}
	if *outFile == "" || *outFile == "-" {
		if _, err := run(ctx, c.stdout); err != nil {
			return c.failf("session %s: %s", session, describe(err))
		}
		return exitOK
	}
	perm := sessionFileMode(pos[0], session)
	stats, err := writeAtomically(*outFile, perm, func(w io.Writer) (export.Stats, error) { return run(ctx, w) })
	if err != nil {
		return c.failf("session %s: %s", session, describe(err))
	}
	fmt.Fprintf(c.stdout, "%s: %d events, %d bytes", *outFile, stats.Events, stats.Bytes)
	if opts.BlobDir != "" {
		fmt.Fprintf(c.stdout, "; %d blob files written to %s (%d bytes), %d there already", stats.BlobFiles, opts.BlobDir, stats.BlobBytes, stats.BlobsPresent)
	}
	fmt.Fprintln(c.stdout)
	return exitOK
}

// sessionFileMode is the permission of the files of the session under
// root, read from its session.json, with no execute bit; or
// sessionstore.DefaultFileMode when that cannot be read.
func sessionFileMode(root string, session uuid.UUID) fs.FileMode {
	info, err := os.Stat(filepath.Join(root, "sessions", session.String(), "session.json"))
	if err != nil {
		return sessionstore.DefaultFileMode
	}
	return info.Mode().Perm() & 0o666
}

// writeAtomically runs write on a temporary file beside path, created with
// permissions perm less the umask (the system applies it), then syncs it
// and renames it to path; on any failure it removes the temporary file
// and leaves path as it was.
func writeAtomically(path string, perm fs.FileMode, write func(io.Writer) (export.Stats, error)) (export.Stats, error) {
	f, err := createTemp(filepath.Dir(path), "."+filepath.Base(path)+".", perm)
	if err != nil {
		return export.Stats{}, err
	}
	tmp := f.Name()
	stats, err := write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return stats, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return stats, nil
}

// createTemp creates a new file in dir named prefix and a random number,
// as os.CreateTemp does, but with permissions perm (less the umask) where
// os.CreateTemp gives 0600.
func createTemp(dir, prefix string, perm fs.FileMode) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}
