package claude

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
)

// Import reads the Claude Code transcripts at paths and writes their
// sessions into st. Each path is a .jsonl file or a directory, walked for
// *.jsonl files: ~/.claude/projects, one project's directory, or a
// session's subagents/ directory. A session's own transcript is written
// before its subagents' (agent-*.jsonl), which name it as their parent.
//
// Summary lines name the session holding their leafUuid, in whichever of
// the files read they are (Meta.Name; a session already stored without a
// name gets it). A file that is not regular, such as a pipe, is read once:
// its summaries name the sessions it holds.
//
// A malformed line is a *importer.LineError in Report.Errors, and the rest
// is imported; so is a file that cannot be read (its *fs.PathError), a
// file of another format (an *importer.FormatError: nothing of it is
// written), and a session the store refuses for its content
// (importer.SessionProblem; a subagent of a session the store refused is
// not written either). What is worth knowing but loses nothing is in
// Report.Notes. The error returned is for what stops the import: a path
// that does not exist (before anything is written), the context ending,
// or a Store error, with the sessions before it written. opts.Progress,
// if set, is called after each session is written. Importing the same
// files again adds nothing.
//
// Import does not read Claude Code's file history: see ImportWith.
func Import(ctx context.Context, st *sessionstore.Store, paths []string, opts *importer.Options) (importer.Report, error) {
	var o Options
	if opts != nil {
		o.Options = *opts
	}
	rep, err := ImportWith(ctx, st, paths, &o)
	return rep.Report, err
}

// Options are ImportWith's: those the importers share, and Claude Code's
// own.
type Options struct {
	importer.Options
	// FileHistory is Claude Code's file-history directory, where it keeps
	// the backups its file-history-snapshot lines name: usually
	// ~/.claude/file-history (it holds a directory per session id). With
	// it, the backups are recorded as workspace snapshots of the sessions
	// (see "File history" in the package doc); without it, the lines are
	// skipped as Import skips them, and counted (Report.History).
	FileHistory string
}

// Report is what ImportWith did: importer.Report, and what came of the
// file-history-snapshot lines.
type Report struct {
	importer.Report
	History HistoryStats
}

// ImportWith is Import with Claude Code's own options: with
// opts.FileHistory, each session's file-history snapshots are recorded
// with its events (see "File history" in the package doc); a backup that
// is not recorded (a missing file, a path outside the session's working
// directory, ...) is counted in Report.History and told in a note for
// its transcript, and the rest is imported. A path or backup file name
// the rules refuse, and a file-history line that does not decode, are
// *importer.LineErrors in Report.Errors. opts may be nil: Import's
// defaults.
func ImportWith(ctx context.Context, st *sessionstore.Store, paths []string, opts *Options) (Report, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var hrep Report
	rep, err := importFiles(ctx, st, paths, &o, &hrep.History)
	hrep.Report = rep
	return hrep, err
}

// importFiles is ImportWith, adding the file history's counts to
// history.
func importFiles(ctx context.Context, st *sessionstore.Store, paths []string, o *Options, history *HistoryStats) (importer.Report, error) {
	var rep importer.Report
	opts := &o.Options
	files, err := collect(paths)
	if err != nil {
		return rep, err
	}
	summaries := gatherSummaries(files)
	parents := map[string]*parentInfo{} // Claude session id -> the imported session
	refused := map[string]bool{}        // Claude session ids whose session the store does not hold after a refused Write
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		f, err := Read(path)
		if err != nil {
			rep.Errors = append(rep.Errors, err)
			continue
		}
		rep.Files++
		rep.Bytes += f.bytes
		rep.Lines += f.Lines
		rep.Errors = append(rep.Errors, f.Errors...)
		rep.Notes = append(rep.Notes, f.Notes...)
		history.Lines += f.History.Lines
		history.Malformed += f.History.Malformed
		history.Unplaced += f.History.Unplaced
		if o.FileHistory != "" {
			rep.Errors = append(rep.Errors, f.historyErrs...)
		}
		for i, s := range f.Sessions {
			info := f.infos[i]
			if name := nameOf(summaries, info); name != "" {
				s.Meta.Name = name
			}
			if info.agentID != "" && refused[info.claudeID] {
				rep.Errors = append(rep.Errors, fmt.Errorf("claude: %s: subagent %s not imported: the store refused its parent session (see above); importing again once it takes the parent imports both", path, info.agentID))
				continue
			}
			if info.agentID != "" && s.Meta.ParentSession == uuid.Nil {
				if err := linkAgent(ctx, st, parents, s, info); err != nil {
					return rep, err
				}
			}
			res, err := writeSession(ctx, st, s, info, o.FileHistory, history, &rep.Notes)
			if err == nil && !res.Created && s.Meta.Name != "" {
				err = nameStored(ctx, st, s.Meta.ID, s.Meta.Name)
			}
			if importer.SessionProblem(err) {
				rep.Errors = append(rep.Errors, fmt.Errorf("claude: %s: %w", path, err))
				if res.Created || res.Added > 0 {
					rep.Add(res)
				}
				if info.agentID == "" {
					if _, merr := st.Meta(ctx, s.Meta.ID); errors.Is(merr, sessionstore.ErrNotFound) {
						refused[info.claudeID] = true
						continue
					} else if merr != nil {
						return rep, merr
					}
					parents[info.claudeID] = &parentInfo{id: s.Meta.ID, info: info}
				}
				continue
			}
			if err != nil {
				return rep, err
			}
			if info.agentID == "" {
				parents[info.claudeID] = &parentInfo{id: s.Meta.ID, info: info}
				delete(refused, info.claudeID)
			}
			rep.Add(res)
			opts.Progressed(rep)
		}
	}
	return rep, nil
}

// parentInfo is a session written by this Import, for its subagents.
type parentInfo struct {
	id   uuid.UUID
	info *sessionInfo
}

// linkAgent sets the parent of the subagent session s: the session of the
// same Claude session id written before it, or else one the store holds
// (labelled claude_session_id, top-level). SpawnedBy is the parent's tool
// call that started it, when this Import read the parent and found it. A
// subagent whose parent is in neither place stays a top-level session
// (the lineage is fixed when a session is made: import the parent's
// transcript with it).
func linkAgent(ctx context.Context, st *sessionstore.Store, parents map[string]*parentInfo, s *importer.Session, info *sessionInfo) error {
	if p, ok := parents[info.claudeID]; ok {
		s.Meta.ParentSession = p.id
		s.Meta.SpawnedBy = spawnedBy(p.info, info)
		return nil
	}
	if _, err := st.Meta(ctx, s.Meta.ID); err == nil {
		return nil // stored already: its lineage is what it is
	} else if !errors.Is(err, sessionstore.ErrNotFound) {
		return err
	}
	q := sessionstore.Query{Labels: map[string]string{"source": "claude-code", "claude_session_id": info.claudeID}}
	for m, err := range st.Sessions(ctx, q) {
		if err != nil {
			return err
		}
		if m.ParentSession == uuid.Nil && m.Labels["claude_agent_id"] == "" {
			s.Meta.ParentSession = m.ID
			break
		}
	}
	return nil
}

// nameStored names a stored session that has no name yet.
func nameStored(ctx context.Context, st *sessionstore.Store, id uuid.UUID, name string) error {
	m, err := st.Meta(ctx, id)
	if err != nil || m.Name != "" {
		return err
	}
	_, err = st.UpdateMeta(ctx, id, func(m *sessionstore.Meta) { m.Name = name })
	return err
}

// collect lists the transcripts under paths: each file given, and the
// *.jsonl files under each directory, without repeats, sessions' own
// transcripts before subagents' (agent-*.jsonl), each group in path order.
func collect(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var own, agents []string
	add := func(p string) {
		p = filepath.Clean(p)
		if seen[p] {
			return
		}
		seen[p] = true
		if isAgentFile(p) {
			agents = append(agents, p)
		} else {
			own = append(own, p)
		}
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("claude: %w", err)
		}
		if !fi.IsDir() {
			add(p)
			continue
		}
		files, err := importer.Files([]string{p})
		if err != nil {
			return nil, fmt.Errorf("claude: walk %s: %w", p, err)
		}
		for _, f := range files {
			add(f)
		}
	}
	slices.Sort(own)
	slices.Sort(agents)
	return append(own, agents...), nil
}

// gatherSummaries reads the summary lines of every file: a summary is
// often written into a later session's file than the one it names. Only
// lines that hold a summary are decoded; errors are left to Read.
func gatherSummaries(files []string) map[string]string {
	out := map[string]string{}
	marker := []byte(`"summary"`)
	for _, path := range files {
		gatherFile(path, marker, out)
	}
	return out
}

// gatherFile adds the summaries of the file at path to out, reading its
// lines of at most importer.MaxLineSize bytes. A file that is not regular
// (a pipe named on the command line) is left to Read: it can be read once.
func gatherFile(path string, marker []byte, out map[string]string) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	lr := importer.NewLineReader(f, path, 0)
	for {
		line, _, err := lr.Next()
		if errors.Is(err, importer.ErrLineTooLong) {
			continue
		}
		if err != nil {
			return
		}
		if !bytes.Contains(line, marker) {
			continue
		}
		if r, err := parseLine(line); err == nil && r.Type == "summary" && r.LeafUUID != "" {
			out[r.LeafUUID] = r.Summary
		}
	}
}
