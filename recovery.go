package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/recovery"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Reconciliation brings a session's derived files in line with its chunks
// when the session is opened for writing, and loads the in-memory index:
// internal/recovery's Analyze reads everything and decides, without
// writing (analyze), and its Apply carries out the repairs
// (applyRepairs). Verify, a read-only store's sessions and a failed
// session loading its index run the analysis only. The package comment
// of internal/recovery gives the steps, what each repairs, and why a
// crash during them is recovered by the next.
//
// Corruption is never repaired: the session opens damaged, with the valid
// prefix (every event before the first bad one) readable, and refuses
// writes. Nothing on disk is changed.

// recoveryPlan is what analyze found: internal/recovery's Plan, with its
// damage as *CorruptionErrors and the fields the engine reads under the
// names it has used for them.
type recoveryPlan struct {
	plan *recovery.Plan

	corrupt *CorruptionError // first corruption found; nil if none
	lostErr *CorruptionError // acknowledged events lost at the end of the log (recovery.Plan.LostErr)

	indexBad     int64       // offset of index.jsonl's first invalid line, or -1
	chunks       []uint32    // chunk numbers, ascending
	sealed       []bool      // sealed[n]: chunk n is (also) a sealed file
	newestSealed bool        // the newest chunk is sealed (compressed)
	activeSize   int64       // end of valid data in the newest chunk
	headOnDisk   uuid.UUID   // what HEAD holds; uuid.Nil if absent or bad
	lost         []uuid.UUID // events index lines name whose records are lost

	// index is what the analysis read: every event of the log, or its
	// valid prefix when it found corruption.
	index memIndex
}

// analyze reads a session's files and decides the repairs, writing
// nothing (recovery.Analyze). Corruption is reported in the plan, with
// its index holding the valid prefix; the error is for I/O failures
// only. outside, nil but for a fork, accepts the parents its prefix holds
// (fork.go).
func analyze(fsys vfs.FS, dir string, readOnly bool, outside func(uuid.UUID) bool) (*recoveryPlan, error) {
	p, err := recovery.Analyze(fsys, dir, readOnly, outside)
	if p == nil {
		return nil, err
	}
	var lostErr *CorruptionError
	if p.LostErr != nil {
		lostErr = corruption(p.LostErr)
	}
	return &recoveryPlan{
		plan:         p,
		corrupt:      corruption(p.Corrupt),
		lostErr:      lostErr,
		indexBad:     p.IndexBad,
		chunks:       p.Chunks,
		sealed:       p.Sealed,
		newestSealed: p.NewestSealed,
		activeSize:   p.ActiveSize,
		headOnDisk:   p.HeadOnDisk,
		lost:         p.Lost,
		index:        p.Index,
	}, err
}

// corruption returns the damage a package below the root reported as a
// *CorruptionError (sealedErr), nil for none.
func corruption(err error) *CorruptionError {
	if err == nil {
		return nil
	}
	var ce *CorruptionError
	if errors.As(sealedErr(err), &ce) {
		return ce
	}
	return nil
}

// head is the newest event the analysis found, uuid.Nil if none.
func (p *recoveryPlan) head() uuid.UUID {
	if e, ok := p.index.Last(); ok {
		return e.ID
	}
	return uuid.Nil
}

// damage is the first corruption analyze found, or the loss of
// acknowledged events at the end of the log (p.lost), which a writer
// repairs but a reader and Verify report.
func (p *recoveryPlan) damage() *CorruptionError {
	if p.corrupt != nil {
		return p.corrupt
	}
	return p.lostErr
}

// repairs describes what applyRepairs would change, for logs and Verify.
func (p *recoveryPlan) repairs() []string {
	r := p.plan
	x := &p.index
	var out []string
	if r.TornPath != "" {
		out = append(out, fmt.Sprintf("cut the torn tail of %s at offset %d (%d bytes, kept in %s): %v", r.TornPath, r.ActiveSize, r.TornSize-r.ActiveSize, r.TornKeep, r.TornErr))
	}
	if len(r.Lost) > 0 {
		out = append(out, fmt.Sprintf("drop the %d index lines of events whose records are damaged (the first %s) and rewrite %s", len(r.Lost), r.Lost[0], indexName))
	}
	if p.indexBad >= 0 {
		out = append(out, fmt.Sprintf("cut %s at offset %d, its first invalid line: %v", indexName, r.IndexEnd, r.IndexBadErr))
	}
	if r.StaleLines > 0 {
		out = append(out, fmt.Sprintf("drop %d lines of sealed chunks from %s, which the chunks embed", r.StaleLines, indexName))
	}
	if n := len(r.PlainEntries(x.Entries[r.FirstNew:])); n > 0 {
		out = append(out, fmt.Sprintf("add %d index entries rebuilt from the chunks", n))
	}
	for _, name := range r.SealTemps {
		out = append(out, "remove "+name+" left by an interrupted sealing")
	}
	for _, n := range r.Unsealed {
		out = append(out, fmt.Sprintf("remove %s, already sealed in %s%s", chunkName(n), chunkName(n), sealedExt))
	}
	if r.MetaTemp {
		out = append(out, "remove "+metaFile+".tmp left by an interrupted metadata update")
	}
	switch {
	case r.HeadFinish:
		out = append(out, "finish the interrupted HEAD update")
	case r.HeadTemp:
		out = append(out, "remove "+headfile.Temp+", which names no known event")
	}
	head := p.head()
	headBad := damage(r.HeadBad)
	switch {
	case r.HeadBad != nil && head == uuid.Nil:
		out = append(out, fmt.Sprintf("keep %s aside in %s and remove it, the session has no events: %v", headfile.Name, filepath.Base(r.HeadKeep), headBad))
	case r.HeadBad != nil:
		out = append(out, fmt.Sprintf("keep %s aside in %s and set HEAD to %s, the newest event: %v", headfile.Name, filepath.Base(r.HeadKeep), head, headBad))
	case head != uuid.Nil && head != p.headOnDisk:
		was := "missing"
		if p.headOnDisk != uuid.Nil {
			was = "was " + p.headOnDisk.String()
		}
		out = append(out, fmt.Sprintf("set HEAD to %s (%s)", head, was))
	}
	return out
}

// scanChunk indexes the records of chunk n of dir from off into x
// (recovery.Plan.ScanChunk), its damage as *CorruptionError.
func (p *recoveryPlan) scanChunk(fsys vfs.FS, x *memIndex, dir string, n uint32, off int64, newest bool) error {
	if p.plan == nil {
		p.plan = &recovery.Plan{IndexBad: p.indexBad}
	}
	return sealedErr(p.plan.ScanChunk(fsys, x, dir, n, off, newest))
}

// applyRepairs carries out the repairs of plan p in the session directory
// dir, each synced before the next, and returns the size of index.jsonl
// after them (recovery.Apply). It changes files only; a crash at any
// point leaves files the next analysis plans the rest of the repairs
// from.
func applyRepairs(fsys vfs.FS, dir string, p *recoveryPlan, perm os.FileMode) (int64, error) {
	p.plan.Index = p.index
	return recovery.Apply(fsys, dir, p.plan, perm)
}

// Repair opens a session for writing and reconciles it at once, carrying
// out the repairs Verify lists (VerifyReport.Repairs) that a writer would
// otherwise make when a call first needs the session's index, and returns
// them, in the words Verify uses: nil when the files needed none. Repairs
// this Store made earlier, when another call opened the session, are
// returned by the first Repair after them.
//
// When Repair returns, every repair is durable. The bytes it cuts are
// kept: a torn tail in a "<chunk>.broken-<offset>" file beside the chunk,
// a bad HEAD in HEAD.broken. It cannot repair corruption (a damaged record
// followed by valid ones, a missing chunk): it returns the
// *CorruptionError and changes nothing. Like the open it runs, it checks
// the files a writer's open checks (the indexes, the chunks after the last
// index line, the record of that line, HEAD), not every record: Verify
// reads the whole session, and finds damage Repair does not look for.
//
// Errors: ErrReadOnly, ErrNotFound, ErrLocked, *CorruptionError, ErrClosed.
func (s *Store) Repair(ctx context.Context, session uuid.UUID) ([]string, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	var done []string
	err := s.withHandle(ctx, session, func(h *openSession) error {
		done, h.repaired = h.repaired, nil
		return nil
	})
	return done, err
}

// errRepairFailed marks an error of reconcile after it may have begun to
// change the session's files: its repairs are half made (each step is
// safe to redo, but the files are no longer what the analysis saw), so
// the session must not go on as the analysis left it. A lazily opened
// session is closed (materialize), and the next call opens it again from
// its files, analyzing them as they are.
var errRepairFailed = errors.New("sessionstore: repair failed")

// syncFile makes the data of the file at path durable (durable.SyncFile).
func syncFile(fsys vfs.FS, path string) error { return durable.SyncFile(fsys, path) }

// removeIfExists removes a file and syncs its directory, doing nothing when
// the file is absent (durable.RemoveFile).
func removeIfExists(fsys vfs.FS, path string) error { return durable.RemoveFile(fsys, path) }
