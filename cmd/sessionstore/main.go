// Command sessionstore inspects a sessionstore root: it lists sessions
// (ls, and query for a page of those a filter selects), draws a session's
// event tree, prints its active path or one event, checks sessions for
// corruption, makes the repairs a crash leaves to do, collects
// unreferenced blobs, upgrades older sessions and roots, deletes sessions
// (rm, prune), lists and changes lanes, imports other tools' transcripts
// (import) and exports a session as JSON lines or a Markdown transcript
// (export); files, diff and restore read the workspace snapshots a session
// recorded; serve shows the sessions in a browser, version prints the
// version it was built from.
//
//	cd cmd && go run ./sessionstore ls <root>
//	cd cmd && go install ./sessionstore   # from a clone: cmd/go.mod has a replace directive
//
// Every command but gc, repair, upgrade, rm, prune (without -dry-run),
// import, restore -branch (without -dry-run) and the lanes subcommands that
// change lanes opens the store with
// Options.ReadOnly, so it takes no lock, writes nothing and is safe beside
// a running writer. Run it with no arguments for the list of commands.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

func main() {
	// SIGINT or SIGTERM cancels the command's context, so that a command
	// writing the store (import, prune, ...) stops between two writes,
	// closes the store and says what it did; a second signal ends the
	// process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	status := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// Exit statuses.
const (
	exitOK    = 0 // success
	exitFail  = 1 // an error, or verify found a problem
	exitUsage = 2 // bad command line
)

const usage = `usage: sessionstore <command> [flags] <root> [arguments]

Inspects the sessions stored under <root>. Every command but gc, repair,
upgrade, rm, undelete, purge, prune (without -dry-run), import, restore
-branch (without -dry-run) and the lanes subcommands that change lanes
opens the store read-only (no lock, nothing written), so it is safe beside
a writer.

commands:
  ls     [-json] <root>                       list the sessions
  query  [-parent id] [-cwd dir] [-label k=v]... [-since t] [-until t]
         [-limit n] [-cursor c] [-json] <root>
                                              one page of the selected sessions, newest
                                              first, and the next page's cursor
  search [-parent id] [-cwd dir] [-label k=v]... [-since t] [-until t]
         [-kind k]... [-role r]... [-limit n] [-json] <root> <text>...
                                              the events whose records hold the words
                                              and "phrases", best first: session, event,
                                              rank and a snippet
  tree   [-full] <root> <session>             the event tree, indented where it forks,
                                              with each event's preview (a custom record's
                                              summary); reads no other record
  path   [-json] [-width n] <root> <session> [leaf]
                                              the active path, or the branch ending at leaf
  show   [-lazy] <root> <session> <event>     one event as indented JSON
  verify <root> [session...]                  check sessions (all when none is named);
                                              exit status 1 if any has a problem
  repair <root> <session>                     make the repairs verify lists now
                                              (opens the session for writing)
  gc     [-dry-run] <root> <session>          remove blobs no event refers to, or with
                                              -dry-run say what would go
                                              (opens the session for writing)
  upgrade [-all] [-compression zstd|none] <root> [session...]
                                              move older sessions to format 3, and
                                              convert the root's chunks to a compression mode
                                              (opens the store for writing)
  rm     <root> <session>                     delete a session: to the trash, kept a week
                                              (opens the store for writing)
  trash  <root>                               the deleted sessions the trash keeps
  undelete <root> <session>                   bring a session back from the trash
                                              (opens the store for writing)
  purge  <root> <session>                     remove a session for good, from the store
                                              and the trash (opens the store for writing)
  prune  [-dry-run] [-older-than t] [-keep n] [-recent d] [-label k=v]... [-dir path] <root>
                                              move the sessions a retention policy selects
                                              to the trash (never pinned ones, nor those
                                              used within -recent, default 1h), or with
                                              -dry-run list them (read-only)
  export [-format jsonl|md] [-scope tree|path|context] [-blobs inline|dir] [-full] [-o file]
         <root> <session>                     the session as JSON lines (every branch, by default)
                                              or a Markdown transcript of the active path
  lanes  <root> <session>                     the named branches (lanes), "*" the active one
  lanes  <root> <session> create|move <name> <event>
  lanes  <root> <session> switch|delete <name>
                                              change them (opens the session for writing)
  files  [-json] <root> <session> [event]     the workspace the session's snapshots recorded,
                                              as of event (default: the active path's
                                              end): mode, size, digest, path
  diff   [-json] <root> <session> <from> <to>
                                              the files that differ between two events'
                                              workspaces: added, modified or deleted
  restore [-dry-run] [-branch] [-ignore pattern]... [-gitignore]
         <root> <session> <event> <dir>
                                              make dir hold the workspace as of event
                                              (files written, others removed but those
                                              the ignore rules match), or with -dry-run
                                              list what would change; -branch also moves
                                              the active lane to event (opens the session
                                              for writing)
  keys   <root> rewrap | <root> reencrypt <session>...
                                              rotate an encrypted store's keys: every data
                                              key wrapped under the current key-encryption
                                              key, or sessions sealed again under a new data
                                              key (keys from $SESSIONSTORE_KEY_FILE or
                                              $SESSIONSTORE_KEYS; opens the store for writing)
  import <source> [-store root] [-progress n] <path>...
                                              import transcripts (source: claude, codex
                                              or pi) from files and directories into the
                                              store at -store (default $SESSIONSTORE_ROOT),
                                              which it creates if needed; again adds nothing;
                                              exit status 1 if a line was malformed
  serve  [-addr host:port] [-poll d] <root>
                                              a web view of the sessions, live while a
                                              writer appends (read-only; loopback only,
                                              default 127.0.0.1:8080); Ctrl-C stops
  version                                     the version this command was built from
  help   [command]                            this text, or a command's flags

A session or event is named by its full id or by a unique prefix of the id
or of its last group: the 8-digit short id that tree and path print. A time
(query -since and -until, prune -older-than) is an RFC 3339 time
(2026-01-02T15:04:05Z), a date (2026-01-02, midnight UTC) or a duration
before now (720h). Flags may come before or after the arguments;
"sessionstore <command> -h" lists a command's flags. Exit status: 0 on
success (and for help, -h or --help), 1 on a failure or a problem found, 2
for a bad command line.
`

// command is one subcommand: it gets its own arguments (flags included)
// and returns the exit status.
type command func(ctx context.Context, c *cmdEnv, args []string) int

var commands = map[string]command{
	"ls":       cmdLs,
	"tree":     cmdTree,
	"path":     cmdPath,
	"show":     cmdShow,
	"verify":   cmdVerify,
	"repair":   cmdRepair,
	"gc":       cmdGC,
	"upgrade":  cmdUpgrade,
	"keys":     cmdKeys,
	"rm":       cmdRm,
	"trash":    cmdTrash,
	"undelete": cmdUndelete,
	"purge":    cmdPurge,
	"prune":    cmdPrune,
	"lanes":    cmdLanes,
	"query":    cmdQuery,
	"search":   cmdSearch,
	"import":   cmdImport,
	"export":   cmdExport,
	"files":    cmdFiles,
	"diff":     cmdDiff,
	"restore":  cmdRestore,
	"serve":    cmdServe,
	"version":  cmdVersion,
}

// run executes the command line args (without the program name), writing
// its output to stdout and its diagnostics to stderr, and returns the exit
// status. Help asked for ("help", "-h", "--help", "help <command>",
// "<command> -h") is printed on stdout with status 0, as Go's flag package
// exits; a bad command line prints the usage on stderr, with status 2.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run under ctx: a command stops when ctx ends (main ends it
// on SIGINT and SIGTERM).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && name == "help" {
			if _, ok := commands[args[1]]; !ok || len(args) > 2 {
				fmt.Fprintf(stderr, "sessionstore: help takes one command name, not %q\n\n", strings.Join(args[1:], " "))
				fmt.Fprint(stderr, usage)
				return exitUsage
			}
			return runContext(ctx, []string{args[1], "-h"}, stdout, stderr)
		}
		if len(args) > 1 {
			fmt.Fprintf(stderr, "sessionstore: %s takes no arguments (\"help <command>\" shows a command's flags)\n\n", name)
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		if _, err := io.WriteString(stdout, usage); err != nil {
			fmt.Fprintf(stderr, "help: write output: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "sessionstore: unknown command %q\n\n", name)
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	c := &cmdEnv{name: name, stdout: bufio.NewWriter(stdout), stderr: stderr}
	status := cmd(ctx, c, args[1:])
	if c.helped {
		// The command's parse printed its usage on stdout and stopped it.
		status = exitOK
	}
	if err := c.stdout.Flush(); err != nil && status == exitOK {
		fmt.Fprintf(stderr, "%s: write output: %v\n", name, err)
		status = exitFail
	}
	return status
}

// cmdEnv is what a command writes to, and its name for messages.
type cmdEnv struct {
	name   string
	stdout *bufio.Writer // flushed by run, and before each message on stderr
	stderr io.Writer
	helped bool // -h or -help was given: the usage is printed, the status is 0
}

// failf reports an error of the command and returns exitFail.
func (c *cmdEnv) failf(format string, args ...any) int {
	c.warnf(format, args...)
	return exitFail
}

// warnf writes a message of the command to stderr, after what it has
// written to stdout so far.
func (c *cmdEnv) warnf(format string, args ...any) {
	c.stdout.Flush() // an error here is the one run reports
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, fmt.Sprintf(format, args...))
}

// usagef reports a bad command line and returns exitUsage.
func (c *cmdEnv) usagef(fs *flag.FlagSet, format string, args ...any) int {
	c.warnf(format, args...)
	fs.Usage()
	return exitUsage
}

// newFlags returns the flag set of the command, whose usage line is
// synopsis. Its -h and -help flags ask for the usage (see helpFlag).
func (c *cmdEnv) newFlags(synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	printUsage := func(w io.Writer) {
		fmt.Fprintln(w, strings.TrimSpace("usage: sessionstore "+c.name+" "+synopsis))
		// The flags but -h and -help, with their defaults as declared.
		shown := flag.NewFlagSet(c.name, flag.ContinueOnError)
		shown.SetOutput(w)
		fs.VisitAll(func(f *flag.Flag) {
			if _, ok := f.Value.(*helpFlag); ok {
				return
			}
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		})
		shown.PrintDefaults()
	}
	fs.Usage = func() { printUsage(c.stderr) }
	help := &helpFlag{show: func() {
		c.helped = true
		printUsage(c.stdout)
	}}
	fs.Var(help, "h", "print this help")
	fs.Var(help, "help", "print this help")
	return fs
}

// helpFlag is the -h and -help flag of every command. The flag package
// answers an undeclared -h with flag.ErrHelp, which a command cannot tell
// from a bad flag once it has its exit status; declared, the flag is
// seen by parse, which prints the usage on stdout and returns
// flag.ErrHelp, and run exits 0.
type helpFlag struct {
	asked bool
	show  func() // prints the usage on stdout and marks the command helped
}

func (h *helpFlag) String() string   { return "false" }
func (h *helpFlag) IsBoolFlag() bool { return true }

func (h *helpFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("not a boolean")
	}
	h.asked = h.asked || b
	return nil
}

// parse parses args with fs, allowing flags after the positional arguments
// ("tree <root> <session> -full"), and returns the positional arguments.
// After "--" everything is positional. With -h or -help among the flags it
// prints the command's usage on stdout and returns flag.ErrHelp (run then
// exits 0).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseAll(fs, args)
	if err != nil {
		return nil, err
	}
	if f := fs.Lookup("h"); f != nil {
		if h, ok := f.Value.(*helpFlag); ok && h.asked {
			h.show()
			return nil, flag.ErrHelp
		}
	}
	return pos, nil
}

func parseAll(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseArgs parses args and checks the number of positional arguments
// (max < 0: no limit) and the form of the ids among them: every argument
// after <root> names a session or an event, ids[i] (the last one for the
// arguments past the end) says which; an empty name is an argument that
// is not an id (restore's <dir>). It returns the status to exit with
// when it fails.
func (c *cmdEnv) parseArgs(fs *flag.FlagSet, args []string, min, max int, ids ...string) ([]string, int, bool) {
	pos, err := parse(fs, args)
	if err != nil {
		// The flag package has printed the error and the usage, or parse
		// the usage asked for.
		return nil, exitUsage, false
	}
	switch {
	case len(pos) < min:
		return nil, c.usagef(fs, "missing arguments"), false
	case max >= 0 && len(pos) > max:
		return nil, c.usagef(fs, "too many arguments: %s", strings.Join(pos[max:], " ")), false
	}
	for i, arg := range pos[1:] {
		if len(ids) == 0 {
			break
		}
		what := ids[len(ids)-1]
		if i < len(ids) {
			what = ids[i]
		}
		if what != "" && !wellFormedID(arg) {
			return nil, c.usagef(fs, "%s %q is neither an id nor an id prefix (hex digits, and dashes where the id has them)", what, arg), false
		}
	}
	return pos, exitOK, true
}

// The environment variables that give the inspector the key-encryption
// keys of an encrypted store (Options.Keys): a key file's path, or the
// keys themselves (sessionstore.KeysFromEnv). Without either, encrypted
// sessions are refused with a *sessionstore.KeyError, and new sessions
// are plain.
const (
	keyFileEnv = "SESSIONSTORE_KEY_FILE"
	keysEnv    = "SESSIONSTORE_KEYS"
)

// envKeys returns the KeyProvider the environment gives, or nil.
func envKeys() (sessionstore.KeyProvider, error) {
	if path := os.Getenv(keyFileEnv); path != "" {
		k, err := sessionstore.LoadKeyFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyFileEnv, err)
		}
		return k, nil
	}
	if os.Getenv(keysEnv) != "" {
		return sessionstore.KeysFromEnv(keysEnv)
	}
	return nil, nil
}

// openReadOnly opens the store at root for reading.
func (c *cmdEnv) openReadOnly(root string) (*sessionstore.Store, error) {
	keys, err := envKeys()
	if err != nil {
		return nil, err
	}
	s, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true, Keys: keys})
	if err != nil {
		return nil, openError(root, err, "")
	}
	return s, nil
}

// openError is the error of opening the store at root; mode is "" or
// " for writing".
func openError(root string, err error, mode string) error {
	if errors.Is(err, sessionstore.ErrNoStore) {
		reason := "it holds no sessions directory"
		switch info, serr := os.Stat(root); {
		case errors.Is(serr, fs.ErrNotExist):
			reason = "the directory does not exist"
		case serr == nil && !info.IsDir():
			reason = "it is not a directory"
		}
		return fmt.Errorf("no store at %q: %s", root, reason)
	}
	return fmt.Errorf("cannot open the store at %q%s: %s", root, mode, describe(err))
}

// openStore parses the arguments of a command whose first argument is
// <root>, min to max arguments in all (max < 0: no limit) and the session
// and event ids after it (see parseArgs), and opens the store read-only.
// On failure s is nil and the command exits with status; otherwise the
// command closes s.
func (c *cmdEnv) openStore(fs *flag.FlagSet, args []string, min, max int, ids ...string) (s *sessionstore.Store, pos []string, status int) {
	pos, status, ok := c.parseArgs(fs, args, min, max, ids...)
	if !ok {
		return nil, nil, status
	}
	s, err := c.openReadOnly(pos[0])
	if err != nil {
		return nil, nil, c.failf("%v", err)
	}
	return s, pos, exitOK
}

// openSession is openStore for a command whose second argument is
// <session>: it also resolves the session.
func (c *cmdEnv) openSession(ctx context.Context, fs *flag.FlagSet, args []string, min, max int, ids ...string) (s *sessionstore.Store, session uuid.UUID, pos []string, status int) {
	s, pos, status = c.openStore(fs, args, min, max, ids...)
	if s == nil {
		return nil, uuid.Nil, nil, status
	}
	session, err := resolveSession(ctx, s, pos[1])
	if err != nil {
		s.Close()
		return nil, uuid.Nil, nil, c.failf("%v", err)
	}
	return s, session, pos, exitOK
}

// notFoundError reports an id or prefix that names no session or event; it
// matches sessionstore.ErrNotFound.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == sessionstore.ErrNotFound }

// ambiguousError reports a prefix that several ids start with.
type ambiguousError struct{ msg string }

func (e *ambiguousError) Error() string { return e.msg }

// resolveSession turns arg (a full id or a unique prefix) into a session id.
// A session whose session.json cannot be read is still matched: the
// command's own calls report its damage.
func resolveSession(ctx context.Context, s *sessionstore.Store, arg string) (uuid.UUID, error) {
	if id, err := uuid.Parse(arg); err == nil {
		// Meta reads session.json only. Other errors (a damaged
		// session.json) are left to the command's own calls to report.
		if _, err := s.Meta(ctx, id); errors.Is(err, sessionstore.ErrNotFound) {
			return uuid.Nil, &notFoundError{fmt.Sprintf("session %s not found in %q", id, s.Dir())}
		}
		return id, nil
	}
	metas, err := s.List(ctx)
	var listErr *sessionstore.ListError
	if err != nil && !errors.As(err, &listErr) {
		return uuid.Nil, fmt.Errorf("list the sessions to match %q: %s", arg, describe(err))
	}
	ids := make([]uuid.UUID, 0, len(metas))
	for _, m := range metas {
		ids = append(ids, m.ID)
	}
	if listErr != nil {
		for _, u := range listErr.Unreadable {
			ids = append(ids, u.ID)
		}
	}
	id, err := matchPrefix("session", arg, ids)
	if errors.Is(err, sessionstore.ErrNotFound) {
		err = &notFoundError{fmt.Sprintf("no session in %q matches %q", s.Dir(), arg)}
	}
	return id, err
}

// resolveEvent turns arg (a full id or a unique prefix) into the id of an
// event of the session. A full id is not looked up: the command's call
// reports an event the session does not hold.
func resolveEvent(ctx context.Context, s *sessionstore.Store, session uuid.UUID, arg string) (uuid.UUID, error) {
	if id, err := uuid.Parse(arg); err == nil {
		return id, nil
	}
	nodes, err := s.Tree(ctx, session)
	if err != nil && len(nodes) == 0 {
		return uuid.Nil, fmt.Errorf("read the tree to match %q: %s", arg, describe(err))
	}
	ids := make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	id, merr := matchPrefix("event", arg, ids)
	if merr != nil && err != nil {
		// The tree stops at the damage: the event may be past it.
		return uuid.Nil, fmt.Errorf("%w (only the events before the damage were searched: %s)", merr, describe(err))
	}
	return id, merr
}

// wellFormedID reports whether arg can name an id: a full id, or a prefix
// of one (hex digits and dashes, at least one digit).
func wellFormedID(arg string) bool {
	if _, err := uuid.Parse(arg); err == nil {
		return true
	}
	p := strings.ToLower(arg)
	return strings.Trim(p, "0123456789abcdef-") == "" && strings.Trim(p, "-") != ""
}

// matchPrefix returns the one id whose canonical form, that form without
// its dashes, or its last group (where the short id is) starts with prefix.
func matchPrefix(what, prefix string, ids []uuid.UUID) (uuid.UUID, error) {
	if !wellFormedID(prefix) {
		return uuid.Nil, fmt.Errorf("%s %q is neither an id nor an id prefix", what, prefix)
	}
	p := strings.ToLower(prefix)
	dashless := !strings.Contains(p, "-")
	var found []uuid.UUID
	for _, id := range ids {
		s := id.String()
		if strings.HasPrefix(s, p) || strings.HasPrefix(s[24:], p) ||
			(dashless && strings.HasPrefix(strings.ReplaceAll(s, "-", ""), p)) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return uuid.Nil, &notFoundError{fmt.Sprintf("no %s matches %q", what, prefix)}
	case 1:
		return found[0], nil
	}
	names := make([]string, 0, 4)
	for i, id := range found {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(found)-3))
			break
		}
		names = append(names, id.String())
	}
	return uuid.Nil, &ambiguousError{fmt.Sprintf("%s prefix %q is ambiguous: it matches %s; give more of the id", what, prefix, strings.Join(names, ", "))}
}

// describe turns a library error into a message, with a hint for the
// errors a user can act on.
func describe(err error) string {
	switch {
	case errors.Is(err, sessionstore.ErrLocked):
		return fmt.Sprintf("%v (another process holds the session open for writing; stop it first)", err)
	case errors.Is(err, sessionstore.ErrCorrupt):
		return fmt.Sprintf("%v (verify lists the session's problems)", err)
	case errors.Is(err, sessionstore.ErrUnsupportedFormat):
		return fmt.Sprintf("%v (written by a newer sessionstore: use an inspector built from it)", err)
	case errors.Is(err, sessionstore.ErrNotFound):
		return "not found" // the caller names what
	}
	return err.Error()
}

// shellQuote quotes s for a shell command line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// verifyHint is the command line that lists the problems of a session.
func verifyHint(root string, session uuid.UUID) string {
	return fmt.Sprintf("`sessionstore verify %s %s`", shellQuote(root), session)
}

// idOrNone is the id, or "-" for none (uuid.Nil).
func idOrNone(id uuid.UUID, name func(uuid.UUID) string) string {
	if id == uuid.Nil {
		return "-"
	}
	return name(id)
}
