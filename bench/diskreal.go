package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
)

// realTranscript is one Claude Code transcript file, read as events.
type realTranscript struct {
	name string // path relative to the transcripts directory
	size int64  // bytes of the file
	evs  []Event
}

// loadRealTranscripts reads every non-empty *.jsonl file under dir
// (subagent transcripts included), sorted by path; with limit > 0 only
// the first limit files.
func loadRealTranscripts(dir string, limit int) ([]realTranscript, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		info, err := d.Info()
		if err != nil || info.Size() == 0 {
			return err
		}
		paths = append(paths, path)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the real transcripts (see -transcripts): %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no non-empty *.jsonl file under %s (see -transcripts)", dir)
	}
	// WalkDir visits in lexical order.
	if limit > 0 && len(paths) > limit {
		paths = paths[:limit]
	}
	out := make([]realTranscript, 0, len(paths))
	for _, path := range paths {
		t, err := readRealTranscript(path)
		if err != nil {
			return nil, err
		}
		t.name, _ = filepath.Rel(dir, path)
		out = append(out, t)
	}
	return out, nil
}

// readRealTranscript reads one Claude Code transcript: one event per
// non-blank line, the line's JSON object as the record, kind and role
// from its "type" (claudeKind).
func readRealTranscript(path string) (realTranscript, error) {
	var t realTranscript
	f, err := os.Open(path)
	if err != nil {
		return t, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return t, err
	}
	t.size = info.Size()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l struct {
			Type          string          `json:"type"`
			ToolUseResult json.RawMessage `json:"toolUseResult"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
		kind, role := claudeKind(l.Type, len(l.ToolUseResult) > 0)
		t.evs = append(t.evs, Event{Kind: kind, Role: role, Payload: bytes.Clone(line)})
	}
	return t, sc.Err()
}

// claudeKind maps a Claude Code line's type to an event kind and role:
// "assistant" is an assistant message; "user" is a tool result (role
// tool) when the line carries a toolUseResult, else a user message;
// every other type (system, summary, progress, attachment,
// file-history-snapshot, ...) is a custom event with no role.
func claudeKind(typ string, toolResult bool) (kind, role string) {
	switch {
	case typ == "assistant":
		return "message", "assistant"
	case typ == "user" && toolResult:
		return "tool_result", "tool"
	case typ == "user":
		return "message", "user"
	}
	return "custom", ""
}

// diskReal: every shared real transcript imported into one new store of
// each reading peer (sessionstore with default options), each file one
// session, one durable Append per line, and the bytes of the store's
// directory counted twice: while appending (every session's last Append
// returned, nothing closed: with at most DefaultMaxOpenSessions files, 256,
// every session stays open in the Store) and closed (after Close). Both as
// a ratio to the raw JSONL bytes (the input files' sizes). Once, not per
// repetition.
func (e *env) diskReal() error {
	ts, err := loadRealTranscripts(e.transcripts, e.sz.RealFiles)
	if err != nil {
		return err
	}
	var raw int64
	events := 0
	for _, t := range ts {
		raw += t.size
		events += len(t.evs)
	}
	title := fmt.Sprintf("shared real transcripts (%d files)", len(ts))
	openRow := e.res.row("disk-real/appending", "bytes on disk / raw JSONL, "+title+", default options, while appending", "x raw JSONL", false, "sessionstore")
	closedRow := e.res.row("disk-real/closed", "bytes on disk / raw JSONL, "+title+", default options, closed", "x raw JSONL", false, "sessionstore")
	var b strings.Builder
	fmt.Fprintf(&b, "Bytes on disk, %s under %s: %d sessions, %s events (one per line), raw JSONL %s bytes. Each file imported as one session, one durable Append per line.\n\n", title, e.transcripts, len(ts), thousands(int64(events)), thousands(raw))
	fmt.Fprintf(&b, "| store | import time | while appending: apparent MiB | allocated MiB (du) | x raw | closed: apparent MiB | allocated MiB (du) | x raw |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var breakdown []string
	for _, p := range e.readers() {
		dir, err := e.freshDir("disk-real", p.Name)
		if err != nil {
			return err
		}
		st, err := p.Open(dir)
		if err != nil {
			return err
		}
		t0 := time.Now()
		for _, t := range ts {
			var sid uuid.UUID
			if sid, err = st.Create(e.ctx, t.name); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			for _, ev := range t.evs {
				if _, err := st.Append(e.ctx, sid, ev); err != nil {
					return fmt.Errorf("%s: %s: %w", p.Name, t.name, err)
				}
			}
		}
		took := time.Since(t0)
		open, err := measureDir(dir)
		if err != nil {
			return err
		}
		if err := st.Close(); err != nil {
			return err
		}
		closed, err := measureDir(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "| %s | %.1f s | %.2f | %.2f | %.3f | %.2f | %.2f | %.3f |\n", p.Label, took.Seconds(),
			mib(open.apparent), mib(open.allocated), float64(open.apparent)/float64(raw),
			mib(closed.apparent), mib(closed.allocated), float64(closed.apparent)/float64(raw))
		if p.Name == "sessionstore" {
			breakdown = append(breakdown, open.partsLine(p.Label+", while appending", raw), closed.partsLine(p.Label+", closed", raw))
		}
		openRow.set(p.Name, 0, float64(open.apparent)/float64(raw))
		closedRow.set(p.Name, 0, float64(closed.apparent)/float64(raw))
		e.logf("  %s: imported in %s", p.Name, took.Round(100*time.Millisecond))
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if len(breakdown) > 0 {
		fmt.Fprintf(&b, "\nBytes by part (apparent), and as a fraction of the raw JSONL:\n\n")
		for _, l := range breakdown {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	e.res.detail("%s", b.String())
	return nil
}
