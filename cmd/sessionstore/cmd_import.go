package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/sessionstore/sessionstore/importer/claude"
	"github.com/sessionstore/sessionstore/importer/codex"
	"github.com/sessionstore/sessionstore/importer/pi"
)

// importFunc is the entry point every importer package has.
type importFunc func(ctx context.Context, st *sessionstore.Store, paths []string, opts *importer.Options) (importer.Report, error)

// importSources are the formats import reads, by the name the command line
// gives: one line per importer package.
var importSources = map[string]importFunc{
	"claude": claude.Import,
	"pi":     pi.Import,
	"codex":  codex.Import,
}

// sourceNames lists importSources' names, sorted, joined by sep.
func sourceNames(sep string) string {
	names := make([]string, 0, len(importSources))
	for n := range importSources {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, sep)
}

// storeEnv names the store import writes to when -store is not given.
const storeEnv = "SESSIONSTORE_ROOT"

// cmdImport writes the sessions of another tool's transcripts into a store
// (creating the store's directory if its parent exists): progress on
// stderr every -progress sessions, then a summary on stdout. Importing the
// same files again adds nothing. Exit status 1 if a path does not exist,
// or a file looks like another tool's (then nothing is opened or written,
// and the message names the source that reads it), if any line or file
// was a problem (the summary lists each with its file, and line; the rest
// is imported) or if the import stopped on an error. Notes (what was read
// in a way a reader may not expect, losing nothing) are listed and leave
// the exit status 0.
func cmdImport(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags(sourceNames("|") + " [-store root] [-progress n] <path>...")
	root := fs.String("store", os.Getenv(storeEnv), "the store to import into (default $"+storeEnv+")")
	every := fs.Int("progress", 100, "print progress on stderr every `n` sessions (0: never)")
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	switch {
	case len(pos) == 0:
		return c.usagef(fs, "missing the source (%s) and the paths", sourceNames(", "))
	case importSources[pos[0]] == nil:
		return c.usagef(fs, "unknown source %q (one of: %s)", pos[0], sourceNames(", "))
	case len(pos) == 1:
		return c.usagef(fs, "missing the paths to import")
	case *root == "":
		return c.usagef(fs, "missing -store (or $%s): the store to import into", storeEnv)
	case *every < 0:
		return c.usagef(fs, "-progress must be 0 or more")
	}
	source, paths := pos[0], pos[1:]
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return c.failf("%v", err) // before the store is opened or made
		}
	}
	if status, done := c.checkFormats(source, paths); done {
		return status // before the store is opened or made
	}
	st, err := openWritable(*root)
	if err != nil {
		return c.failf("%v", err)
	}
	opts := &importer.Options{}
	if *every > 0 {
		opts.Progress = func(r importer.Report) {
			if r.Sessions%*every == 0 {
				fmt.Fprintf(c.stderr, "%s: %d sessions, %d events added, %d files, %s read\n", c.name, r.Sessions, r.Added, r.Files, megabytes(r.Bytes))
			}
		}
	}
	rep, err := importSources[source](ctx, st, paths, opts)
	closeErr := st.Close()
	writeImportSummary(c.stdout, source, *root, rep)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return c.failf("import interrupted (the sessions counted above are written; importing again completes the rest)")
	case err != nil:
		return c.failf("import stopped: %s (the sessions counted above are written, the files after are not read; importing again once that is resolved completes the rest)", describe(err))
	case closeErr != nil:
		return c.failf("close the store: %v", closeErr)
	case len(rep.Errors) > 0:
		return c.failf("%d problems in the input (listed above); the rest is imported", len(rep.Errors))
	}
	return exitOK
}

// maxWrongFormat bounds the files of another format import names.
const maxWrongFormat = 5

// checkFormats reads the first line of each regular file under paths
// and, if any looks like a file of another format than source
// (importer.Sniff), reports them and the source that reads them, and
// returns exitFail and true: then nothing is imported. A file that is not
// regular (a pipe: sessionstore import claude <(zcat s.jsonl.gz)) is not
// read here, as it can be read only once: the importer refuses it if its
// first line is of another format, and writes nothing of it.
func (c *cmdEnv) checkFormats(source string, paths []string) (int, bool) {
	files, err := importer.Files(paths)
	if err != nil {
		return c.failf("%v", err), true
	}
	var wrong []string
	looks := map[string]int{}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
			continue // a pipe can be read once: the import reads it, and recognises another format itself
		}
		format, err := importer.SniffFile(f)
		if err != nil {
			continue // the import reports the file
		}
		if format != "" && format != source && importSources[format] != nil {
			wrong = append(wrong, f)
			looks[format]++
		}
	}
	if len(wrong) == 0 {
		return exitOK, false
	}
	c.stdout.Flush()
	for i, f := range wrong {
		if i == maxWrongFormat {
			fmt.Fprintf(c.stderr, "  ... and %d more\n", len(wrong)-i)
			break
		}
		format, _ := importer.SniffFile(f)
		fmt.Fprintf(c.stderr, "  %s: looks like %s\n", f, importer.FormatName(format))
	}
	var use []string
	for format, n := range looks {
		use = append(use, fmt.Sprintf("%d like %s: import them with sessionstore import %s", n, importer.FormatName(format), format))
	}
	slices.Sort(use)
	return c.failf("nothing imported: %d of %d files do not look like %s, but %s", len(wrong), len(files), importer.FormatName(source), strings.Join(use, "; ")), true
}

// writeImportSummary prints what an import read and wrote, each problem
// it met, a malformed line as <file>:<line>: <what>, and each note.
func writeImportSummary(w io.Writer, source, root string, r importer.Report) {
	fmt.Fprintf(w, "imported %s transcripts into %s\n", source, root)
	fmt.Fprintf(w, "  files:    %d (%s, %d lines)\n", r.Files, megabytes(r.Bytes), r.Lines)
	fmt.Fprintf(w, "  sessions: %d (%d new)\n", r.Sessions, r.Created)
	fmt.Fprintf(w, "  events:   %d added, %d already stored\n", r.Added, r.Existing)
	fmt.Fprintf(w, "  problems: %d\n", len(r.Errors))
	for _, e := range r.Errors {
		var le *importer.LineError
		if errors.As(e, &le) {
			fmt.Fprintf(w, "    %s:%d: %v\n", le.Path, le.Line, le.Err)
		} else {
			fmt.Fprintf(w, "    %v\n", e)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "  notes:    %d (not problems: nothing is lost)\n", len(r.Notes))
		for _, n := range r.Notes {
			fmt.Fprintf(w, "    %s\n", n)
		}
	}
}

// megabytes formats n bytes as MB with one decimal, or as bytes under
// 0.1 MB.
func megabytes(n int64) string {
	if n < 100_000 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
