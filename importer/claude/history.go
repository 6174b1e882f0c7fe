package claude

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/sessionstore/sessionstore/internal/workspace"
)

// historyType is the type of the lines that name Claude Code's file
// backups.
const historyType = "file-history-snapshot"

// historyLine is a file-history-snapshot line: the backups Claude Code
// holds of the files it tracks, by their path, as of the user message
// snapshot.messageId; an update (isSnapshotUpdate) adds a file to that
// snapshot when a tool first edits it, and its messageId is then the
// line of that tool call.
type historyLine struct {
	MessageID string `json:"messageId"`
	Snapshot  struct {
		MessageID          string                `json:"messageId"`
		TrackedFileBackups map[string]*backupRef `json:"trackedFileBackups"`
	} `json:"snapshot"`
	IsSnapshotUpdate bool `json:"isSnapshotUpdate"`
}

// backupRef is a tracked file's backup: the file <file-history>/
// <sessionId>/<backupFileName>, or a null backupFileName for a file that
// did not exist.
type backupRef struct {
	BackupFileName *string `json:"backupFileName"`
	Version        int     `json:"version"`
}

// parseHistory decodes a file-history-snapshot line, or says what is
// wrong with it.
func parseHistory(data []byte) (*historyLine, string) {
	var h historyLine
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Sprintf("%s line: %v", historyType, err)
	}
	if h.MessageID == "" {
		return nil, historyType + " line without a messageId"
	}
	if h.Snapshot.MessageID == "" {
		h.Snapshot.MessageID = h.MessageID
	}
	for k, b := range h.Snapshot.TrackedFileBackups {
		if b == nil {
			return nil, fmt.Sprintf("%s line: file %q has no backup entry", historyType, k)
		}
	}
	return &h, ""
}

// HistoryStats counts what an import did with the file-history-snapshot
// lines of Claude Code's transcripts (see "File history" in the package
// doc). A backup is one file of a line at a version the workspace of
// its place in the session does not hold yet (or its removal): the same
// file at the same version in the next lines is not counted again.
type HistoryStats struct {
	Lines     int // file-history-snapshot lines read
	Malformed int // lines that do not decode (reported with Options.FileHistory)
	Unplaced  int // lines whose messageId names no record of the transcript: nothing of them is recorded
	Backups   int // backups the placed lines add

	Snapshots int // snapshot events recorded (Store.RecordFiles)
	Files     int // files they write or remove
	Found     int // snapshot events an earlier import recorded, found in place
	Unchanged int // backups whose content the workspace holds already, or removals of files it does not hold

	// The backups not recorded, by reason.
	NoHistory int // no Options.FileHistory given
	Missing   int // no such regular file in the file-history directory
	Outside   int // a path outside the session's working directory
	Refused   int // a path or backup name the rules refuse (reported as malformed)
	TooLarge  int // a backup larger than the store's record limit
	Late      int // the events after the place were imported already, without it
}

// add adds o to h.
func (h *HistoryStats) add(o HistoryStats) {
	h.Lines += o.Lines
	h.Malformed += o.Malformed
	h.Unplaced += o.Unplaced
	h.Backups += o.Backups
	h.Snapshots += o.Snapshots
	h.Files += o.Files
	h.Found += o.Found
	h.Unchanged += o.Unchanged
	h.NoHistory += o.NoHistory
	h.Missing += o.Missing
	h.Outside += o.Outside
	h.Refused += o.Refused
	h.TooLarge += o.TooLarge
	h.Late += o.Late
}

// skipped is the backups not recorded.
func (h *HistoryStats) skipped() int {
	return h.NoHistory + h.Missing + h.Outside + h.Refused + h.TooLarge + h.Late
}

// srcHistory is a file-history-snapshot line of a file being read.
type srcHistory struct {
	line int
	r    *record
}

// placement is a snapshot to record: the backups of the lines placed
// after one event.
type placement struct {
	after uuid.UUID // the event it follows: the last of the messageId's record
	msg   string    // that record's uuid, for the label
	line  int       // the first line placed there
	files []backup  // in path order
}

// backup is one file of a placement.
type backup struct {
	key  string // the path as the line names it
	path string // relative to the working directory, slash-separated
	name string // backupFileName; "" for a file that did not exist
	line int
}

// sessionHistory is what a session's file-history lines come to.
type sessionHistory struct {
	lines   []srcHistory // the lines placed in the session, in file order
	places  []*placement // after the fold (planHistory), by the event's order
	stats   HistoryStats
	errs    []error         // refused paths and names, malformed lines
	outside map[string]bool // the paths outside the working directory, for the note
	missing string          // a backup file found missing, for the note
}

// label is the label of a placement's manifest, by which a later import
// finds it.
func (p *placement) label() string { return "claude-code file-history " + p.msg }

// planHistory maps the file-history-snapshot lines of f to its sessions:
// each after the last event of the record its messageId names. For an
// update, the files are those it adds to the snapshot it updates (the
// lines before it for that snapshot say the rest, and say it at their own
// place); for another line, all the files it names. Then, walking each
// session's tree, a backup the workspace of its place holds already
// (the same backup name, or a removal of a file not there) is left out,
// and so is a path that is outside the working directory or refused.
func planHistory(f *File, lines []srcHistory) {
	prev := map[string]map[string]*backupRef{} // snapshot messageId -> the last line's backups
	for _, l := range lines {
		f.History.Lines++
		h := l.r.hist
		if h == nil {
			f.History.Malformed++
			f.historyErrs = append(f.historyErrs, importer.Malformed(f.Path, l.line, "%s; left out", l.r.histErr))
			continue
		}
		si := -1
		for i, info := range f.infos {
			if info.leaves[h.MessageID] != uuid.Nil {
				si = i
				break
			}
		}
		backups := h.Snapshot.TrackedFileBackups
		if h.IsSnapshotUpdate {
			// Only what it adds to its snapshot.
			if before, ok := prev[h.Snapshot.MessageID]; ok {
				added := map[string]*backupRef{}
				for k, b := range backups {
					if p, ok := before[k]; !ok || !sameBackup(p, b) {
						added[k] = b
					}
				}
				backups = added
			}
		}
		prev[h.Snapshot.MessageID] = h.Snapshot.TrackedFileBackups
		if si < 0 {
			f.History.Unplaced++
			continue
		}
		info := f.infos[si]
		if info.history == nil {
			info.history = &sessionHistory{}
		}
		cp := *l.r
		hl := *h
		hl.Snapshot.TrackedFileBackups = backups
		cp.hist = &hl
		info.history.lines = append(info.history.lines, srcHistory{line: l.line, r: &cp})
	}
	for i, info := range f.infos {
		if info.history != nil {
			info.history.fold(f.Sessions[i], info)
			f.History.add(info.history.stats)
			f.historyErrs = append(f.historyErrs, info.history.errs...)
		}
	}
}

// sameBackup reports whether a and b name the same backup.
func sameBackup(a, b *backupRef) bool {
	return backupName(a) == backupName(b)
}

// backupName is b's backupFileName, "" for none.
func backupName(b *backupRef) string {
	if b.BackupFileName == nil {
		return ""
	}
	return *b.BackupFileName
}

// fold makes the placements of the session's lines: merged per event,
// in the order of the events, each without the backups the workspace of
// its place holds already, and the paths mapped (see planHistory).
func (sh *sessionHistory) fold(s *importer.Session, info *sessionInfo) {
	index := make(map[uuid.UUID]int, len(s.Events))
	for i, ev := range s.Events {
		index[ev.ID] = i
	}
	at := map[int]*placement{} // event index -> its placement
	lineOf := map[*placement]map[string]int{}
	merged := map[int]map[string]*backupRef{}
	for _, l := range sh.lines {
		msg := l.r.hist.MessageID
		after := info.leaves[msg]
		i := index[after]
		p := at[i]
		if p == nil {
			p = &placement{after: after, msg: msg, line: l.line}
			at[i] = p
			lineOf[p] = map[string]int{}
			merged[i] = map[string]*backupRef{}
		}
		for k, b := range l.r.hist.Snapshot.TrackedFileBackups {
			merged[i][k] = b
			lineOf[p][k] = l.line
		}
	}
	sh.lines = nil
	cwd := strings.TrimRight(s.Meta.WorkingDir, "/")
	windows := isWindowsPath(s.Meta.WorkingDir)
	if windows {
		cwd = strings.TrimRight(strings.ReplaceAll(s.Meta.WorkingDir, `\`, "/"), "/")
	}
	// The backups (by key) the workspace holds as of each event: its
	// parent's, and its placement's. A map is shared until a placement
	// changes it.
	state := make([]map[string]string, len(s.Events))
	for i, ev := range s.Events {
		var cur map[string]string
		if ev.ParentID != uuid.Nil {
			cur = state[index[ev.ParentID]]
		}
		if p := at[i]; p != nil {
			next := maps.Clone(cur)
			if next == nil {
				next = map[string]string{}
			}
			for _, k := range slices.Sorted(maps.Keys(merged[i])) {
				name := backupName(merged[i][k])
				if was, ok := cur[k]; ok && was == name || !ok && name == "" {
					continue // the workspace has it so already (or never had it)
				}
				next[k] = name
				sh.stats.Backups++
				b := backup{key: k, name: name, line: lineOf[p][k]}
				var why string
				b.path, why = relPath(k, cwd, windows)
				switch {
				case why == "outside":
					sh.stats.Outside++
					if sh.outside == nil {
						sh.outside = map[string]bool{}
					}
					sh.outside[k] = true
					continue
				case why != "":
					sh.stats.Refused++
					sh.errs = append(sh.errs, importer.Malformed(s.Path, b.line, "%s file %q: %s; not recorded", historyType, k, why))
					continue
				}
				if name != "" {
					if why := checkName(name); why != "" {
						sh.stats.Refused++
						sh.errs = append(sh.errs, importer.Malformed(s.Path, b.line, "%s file %q: backup file name %q %s; not recorded", historyType, k, name, why))
						continue
					}
				}
				p.files = append(p.files, b)
			}
			cur = next
			if len(p.files) > 0 {
				sh.places = append(sh.places, p)
			}
		}
		state[i] = cur
	}
}

// isWindowsPath reports whether p is a Windows absolute path: a drive
// letter and a separator, or a UNC path.
func isWindowsPath(p string) bool {
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z') || strings.HasPrefix(p, `\\`)
}

// relPath maps a tracked file's path to a workspace path: relative to
// cwd (slash-separated, without a trailing slash; "" when the transcript
// names none) when it is absolute, as it is otherwise. It returns
// "outside" for an absolute path not below cwd, or what the workspace's
// rules (CheckPath: relative, clean, UTF-8) refuse in it.
func relPath(key, cwd string, windows bool) (string, string) {
	p := key
	if windows {
		p = strings.ReplaceAll(p, `\`, "/")
	}
	abs := strings.HasPrefix(p, "/") || windows && isWindowsPath(key)
	if abs {
		rest, ok := strings.CutPrefix(p, cwd+"/")
		if !ok || cwd == "" {
			return "", "outside"
		}
		p = rest
	}
	if !utf8.ValidString(p) {
		return "", "not valid UTF-8"
	}
	if err := workspace.CheckPath(p); err != nil {
		return "", strings.TrimPrefix(err.Error(), workspace.ErrInvalidPath.Error()+" ")
	}
	return p, ""
}

// checkName says what is wrong with a backup file name, "" if nothing:
// it must name a file of the session's file-history directory itself,
// never a path out of it.
func checkName(name string) string {
	switch {
	case name == "." || name == "..":
		return "is not a file name"
	case strings.ContainsAny(name, `/\`):
		return "holds a path separator"
	case strings.IndexByte(name, 0) >= 0:
		return "holds a NUL byte"
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case len(name) > 255:
		return "is too long"
	case filepath.IsAbs(name) || filepath.VolumeName(name) != "":
		return "is a path"
	}
	return ""
}

// historyDir is the file-history directory of one Claude session, opened
// once for an import.
type historyDir struct {
	root *os.Root // nil when it cannot be opened
	path string
	err  error
}

// openHistoryDir opens <base>/<claudeID>. A session id that is not a file
// name opens nothing.
func openHistoryDir(base, claudeID string) *historyDir {
	path := filepath.Join(base, claudeID)
	if why := checkName(claudeID); why != "" || claudeID == "" {
		return &historyDir{path: path, err: fmt.Errorf("session id %q is not a directory name", claudeID)}
	}
	root, err := os.OpenRoot(path)
	return &historyDir{root: root, path: path, err: err}
}

func (d *historyDir) close() {
	if d.root != nil {
		d.root.Close()
	}
}

// errTooLarge is readBackup's error for a backup over its limit.
var errTooLarge = errors.New("larger than the store's record limit")

// readBackup reads the backup file name (checkName's) of d, of at most
// limit bytes: its content and permission bits. It reads only a regular
// file that is the directory's own (os.Root: no path, no link, out of
// it); anything else is fs.ErrNotExist.
func (d *historyDir) readBackup(name string, limit int64) ([]byte, fs.FileMode, error) {
	if d.root == nil {
		return nil, 0, fs.ErrNotExist
	}
	fi, err := d.root.Lstat(name)
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fs.ErrNotExist
	}
	if fi.Size() > limit {
		return nil, 0, errTooLarge
	}
	f, err := d.root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fs.ErrNotExist
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) > limit {
		return nil, 0, errTooLarge
	}
	return data, fi.Mode().Perm(), nil
}

// maxBackup is the largest backup read: the store's default record limit
// (a store with a lower one refuses a larger file, and the import leaves
// it out then).
const maxBackup = sessionstore.DefaultMaxRecordSize

// writeSession writes the session s, read with info, into st: with its
// file-history snapshots when base (Options.FileHistory) is set, else
// with importer.Write alone. Each snapshot is recorded with
// Store.RecordFiles right after the event it follows, which the events
// after it in the transcript then follow: importer.Write writes the
// events up to that one (HEAD there), RecordFiles appends the snapshot,
// and the events below are written under it. A snapshot an earlier
// import recorded is found by its label among the children of its event;
// one whose event has other children (imported before without the file
// history) cannot be put in place and is counted as Late.
func writeSession(ctx context.Context, st *sessionstore.Store, s *importer.Session, info *sessionInfo, base string, stats *HistoryStats, notes *[]importer.Note) (importer.WriteResult, error) {
	sh := info.history
	if sh == nil {
		return importer.Write(ctx, st, s)
	}
	if base == "" {
		for _, p := range sh.places {
			sh.stats.NoHistory += len(p.files)
		}
		stats.add(sh.stats)
		return importer.Write(ctx, st, s)
	}
	defer func() {
		stats.add(sh.stats)
		if n := historyNote(s, sh, base, info.claudeID); n != "" {
			*notes = append(*notes, importer.Note{Path: s.Path, Text: n})
		}
	}()
	if len(sh.places) == 0 {
		return importer.Write(ctx, st, s)
	}
	dir := openHistoryDir(base, info.claudeID)
	defer dir.close()
	w := &historyWriter{st: st, s: s, sh: sh, dir: dir, index: make(map[uuid.UUID]int, len(s.Events)), under: map[uuid.UUID]uuid.UUID{}}
	for i, ev := range s.Events {
		w.index[ev.ID] = i
	}
	var res importer.WriteResult
	// Each Write takes the events of the one before and more: the last
	// one's count of the events found is the whole's, once what the Writes
	// before it added and the snapshots are taken out of it.
	write := func(n int, head uuid.UUID) error {
		evs, snaps := w.events(n)
		r, err := importer.Write(ctx, st, &importer.Session{Meta: s.Meta, Events: evs, Head: head, Path: s.Path})
		res.Created = res.Created || r.Created
		res.Existing = r.Existing - snaps - res.Added
		res.Added += r.Added
		return err
	}
	for _, p := range sh.places {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := write(w.index[p.after]+1, p.after); err != nil {
			return res, err
		}
		if err := w.place(ctx, p); err != nil {
			return res, err
		}
	}
	head := s.Head
	if head == uuid.Nil && len(s.Events) > 0 {
		head = s.Events[len(s.Events)-1].ID
	}
	if snap, ok := w.under[head]; ok {
		head = snap // the snapshot after the leaf is the leaf now
	}
	err := write(len(s.Events), head)
	return res, err
}

// historyWriter writes a session with its snapshots.
type historyWriter struct {
	st    *sessionstore.Store
	s     *importer.Session
	sh    *sessionHistory
	dir   *historyDir
	index map[uuid.UUID]int       // event id -> its index in s.Events
	under map[uuid.UUID]uuid.UUID // event id -> the snapshot event after it
}

// events returns the first n events of s, each snapshot placed so far
// after its event, and the children of that event under the snapshot;
// and the number of snapshots.
func (w *historyWriter) events(n int) ([]sessionstore.Event, int) {
	out := make([]sessionstore.Event, 0, n+len(w.under))
	snaps := 0
	for _, ev := range w.s.Events[:n] {
		if snap, ok := w.under[ev.ParentID]; ok {
			ev.ParentID = snap
		}
		out = append(out, ev)
		if snap, ok := w.under[ev.ID]; ok {
			// Stored already: Write finds it, and takes it as the parent
			// of the events below.
			out = append(out, sessionstore.Event{ID: snap, ParentID: ev.ID, Kind: sessionstore.KindCustom})
			snaps++
		}
	}
	return out, snaps
}

// manifestMark is how a snapshot event's record, and its preview, begin.
const manifestMark = `{"sessionstore":"snapshot"`

// place records the snapshot p after its event, written already, or
// finds it recorded.
func (w *historyWriter) place(ctx context.Context, p *placement) error {
	st, id := w.st, w.s.Meta.ID
	children, err := st.Children(ctx, id, p.after)
	if err != nil {
		return err
	}
	for _, c := range children {
		if c.Kind != sessionstore.KindCustom || c.Preview != "" && !strings.HasPrefix(c.Preview, manifestMark) {
			continue
		}
		ev, err := st.Event(ctx, id, c.ID)
		if err == nil && ev.Record == nil && ev.Digest != "" {
			ev, err = st.Resolve(ctx, id, ev)
		}
		if err != nil {
			return err
		}
		var m struct {
			Tag   string `json:"sessionstore"`
			Label string `json:"label"`
		}
		if bytes.HasPrefix(ev.Record, []byte(manifestMark)) && json.Unmarshal(ev.Record, &m) == nil && m.Label == p.label() {
			w.sh.stats.Found++
			w.under[p.after] = c.ID
			return nil
		}
	}
	ws, err := st.Files(ctx, id, p.after)
	if err != nil {
		return err
	}
	var writes []sessionstore.FileWrite
	byPath := map[string]int{} // two keys may name one path (absolute and relative): the later one's
	add := func(fw sessionstore.FileWrite) {
		if i, ok := byPath[fw.Path]; ok {
			writes[i] = fw
			return
		}
		byPath[fw.Path] = len(writes)
		writes = append(writes, fw)
	}
	for _, b := range p.files {
		if b.name == "" {
			if _, ok := ws.File(b.path); ok {
				add(sessionstore.FileWrite{Path: b.path, Deleted: true})
			} else {
				w.sh.stats.Unchanged++
			}
			continue
		}
		data, mode, err := w.dir.readBackup(b.name, maxBackup)
		switch {
		case errors.Is(err, errTooLarge):
			w.sh.stats.TooLarge++
			continue
		case err != nil:
			w.sh.stats.Missing++
			if w.sh.missing == "" {
				w.sh.missing = b.name
			}
			continue
		}
		if mode == 0 {
			mode = 0o644 // as RecordFiles takes 0
		}
		sum := sha256.Sum256(data)
		if f, ok := ws.File(b.path); ok && f.Digest == "sha256:"+hex.EncodeToString(sum[:]) && f.Mode == mode {
			w.sh.stats.Unchanged++
			continue
		}
		add(sessionstore.FileWrite{Path: b.path, Data: data, Mode: mode})
	}
	if len(writes) == 0 {
		return nil
	}
	if len(children) > 0 {
		w.sh.stats.Late += len(writes)
		return nil
	}
	if next, _, err := st.NextParent(ctx, id); err != nil {
		return err
	} else if next != p.after {
		if err := st.Branch(ctx, id, p.after); err != nil {
			return err
		}
	}
	for {
		ev, err := st.RecordFiles(ctx, id, p.label(), writes...)
		if err == nil {
			w.sh.stats.Snapshots++
			w.sh.stats.Files += len(writes)
			w.under[p.after] = ev.ID
			return nil
		}
		if errors.Is(err, sessionstore.ErrRecordTooLarge) && len(writes) > 0 {
			// The store's limit is lower than maxBackup: leave the
			// largest file out, and try again with the rest.
			k := 0
			for i := range writes {
				if len(writes[i].Data) > len(writes[k].Data) {
					k = i
				}
			}
			writes = slices.Delete(writes, k, k+1)
			w.sh.stats.TooLarge++
			if len(writes) > 0 {
				continue
			}
			err = nil
		}
		// Nothing recorded: cancel the selection, so that the next append
		// follows HEAD.
		if head, herr := st.Head(context.WithoutCancel(ctx), id); herr == nil {
			_ = st.Branch(context.WithoutCancel(ctx), id, head)
		}
		return err
	}
}

// historyNote tells what of the session's file history was not recorded,
// or "" when all was.
func historyNote(s *importer.Session, sh *sessionHistory, base, claudeID string) string {
	st := &sh.stats
	if st.skipped() == 0 {
		return ""
	}
	var parts []string
	if st.Outside > 0 {
		ex := slices.Sorted(maps.Keys(sh.outside))
		parts = append(parts, fmt.Sprintf("%d outside the working directory %q (such as %q)", st.Outside, s.Meta.WorkingDir, ex[0]))
	}
	if st.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d whose backup file is not in %s (such as %q)", st.Missing, filepath.Join(base, claudeID), sh.missing))
	}
	if st.Refused > 0 {
		parts = append(parts, fmt.Sprintf("%d with a path or backup name that is refused (reported as malformed)", st.Refused))
	}
	if st.TooLarge > 0 {
		parts = append(parts, fmt.Sprintf("%d larger than the store's record limit", st.TooLarge))
	}
	if st.Late > 0 {
		parts = append(parts, fmt.Sprintf("%d whose place was imported before without them (delete the session and import it again to record them)", st.Late))
	}
	return fmt.Sprintf("file history: %d backups not recorded: %s; %d snapshots recorded (%d files)", st.skipped(), strings.Join(parts, ", "), st.Snapshots, st.Files)
}
