package sessionstore

import (
	"bytes"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mutateEnv runs TestMutations: SESSIONSTORE_MUTATE=1 runs every mutation,
// a regular expression runs those whose names match. .ci/run sets it.
const mutateEnv = "SESSIONSTORE_MUTATE"

// mutation is a known-bad change to the store: the text old, which must
// occur exactly once in the function whose declaration starts with in (in
// file), becomes new. Every mutation must make some test of the package
// fail: a change that breaks a promise no test notices means the promise
// is unchecked.
type mutation struct {
	name    string
	file    string
	in      string // the start of the function's declaration line
	old     string
	new     string
	promise string // what the mutation breaks
}

// inPlace is Go code that writes data to dir/name in place (truncate,
// write, sync), as a store that did not replace files atomically would;
// it is an expression of type error.
func inPlace(fsys, dir, name, data, perm string) string {
	return fmt.Sprintf(`func() error {
		f, err := %s.OpenFile(filepath.Join(%s, %s), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, %s)
		if err != nil {
			return err
		}
		if _, err := f.Write(%s); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}()`, fsys, dir, name, perm, data)
}

// keeping is expr, an expression of type error, in a function that also
// uses used (say durable.ReplaceFile), so that a mutation taking away the
// only use of an import still compiles.
func keeping(used, expr string) string {
	return fmt.Sprintf("func() error {\n\t\t_ = %s // still imported\n\t\treturn %s\n\t}()", used, expr)
}

// mutations: every sync and directory sync of the store skipped in turn
// (TestSyncSitesMutated checks that each has its mutation), then the
// orderings and checks the durability contract rests on.
var mutations = []mutation{
	// The syncs of an append.
	{"skip the fdatasync of appends", "internal/seam/chunk.go", "func (c *Chunk) Sync(", "c.f.Sync()", "error(nil)",
		"an acknowledged event is on stable storage"},
	{"journaled writes reserve a preallocation step", "internal/seam/chunk.go", "func (c *Chunk) Reserve(", "to := (end + ReserveStep - 1) &^ (ReserveStep - 1)", "to := end + PreallocMax",
		"a journaled session keeps less than ReserveStep of free space while appending"},
	{"skip the fdatasync of appends where the engine calls it", "durable.go", "func (c *localChunk) Sync(", "c.Chunk.Sync()", "error(nil)",
		"an acknowledged event is on stable storage"},
	{"skip the commit group's fdatasync", "commit.go", "func (h *openSession) writeGroup(", "return nil, nil, f.Sync(), false", "return nil, nil, func(any) error { return nil }(f), false",
		"an acknowledged event is on stable storage"},
	{"acknowledge before the fdatasync ends", "commit.go", "func (h *openSession) writeGroup(", "return nil, nil, f.Sync(), false", "go f.Sync()\n\t\treturn nil, nil, nil, false",
		"Append returns only once a sync that started after its record was written has ended"},
	{"skip the chunk's sync when settling journaled records", "internal/commit/pipeline.go", "func (p *Pipeline[R]) Settle(", "if err := c.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"a chunk settled for its sealing or close holds its journaled records durably"},
	{"skip the root's name sync when writing its configuration", "store.go", "func checkRootConfig(", "if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {", "if err := error(nil); err != nil {",
		"a root another process made is durable before a session is created in it"},
	{"skip the sync of the JOURNAL marker", "internal/journal/marker.go", "func WriteMarker(", "err = f.Sync()", "err = error(nil)",
		"the journal holding a session's records is named durably before the first of them is committed"},
	{"skip the directory sync of a new JOURNAL marker", "internal/journal/marker.go", "func WriteMarker(", "err = fsys.SyncDir(dir)", "err = error(nil)",
		"a new JOURNAL marker's name is durable before the first record it covers is committed"},
	{"skip the sync of a full chunk's journaled records", "internal/chunkwriter/writer.go", "func (w *Writer) Rotate(", "if err := w.active.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"a chunk is durable before it is closed and sealed"},
	{"skip the chunk's sync before forgetting a session's records", "opensession.go", "func (h *openSession) forgetJournal(", "if err := h.chunks.Checkpoint(); err != nil {", "if err := error(nil); err != nil {",
		"the journal forgets a session's records only once its chunks hold them durably"},
	{"seal a full chunk while the appends go on", "internal/chunkwriter/writer.go", "func (w *Writer) sealWait(", "if w.sealIdle < 0 || len(todo) >= SealBacklog {", "if true {",
		"sealing waits for a pause in the appends (SealIdle) before it competes with them for the disk and the cores"},
	{"let full chunks wait for a pause without bound", "internal/chunkwriter/writer.go", "func (w *Writer) sealWait(", "if w.sealIdle < 0 || len(todo) >= SealBacklog {", "if w.sealIdle < 0 {",
		"under appends without a pause, at most SealBacklog full chunks wait plain"},
	{"AwaitSealing waits for a pause in the appends", "internal/chunkwriter/writer.go", "func (w *Writer) AwaitSealing(", "			close(w.hurry)", "			_ = w.hurry",
		"Close, Flush and Verify seal the full chunks at once, not after a pause"},
	{"skip the active chunk's sync at a checkpoint", "internal/chunkwriter/writer.go", "func (w *Writer) Checkpoint(", "w.active.Sync()", "error(nil)",
		"a checkpoint (Flush, forgetting a session's journaled records) leaves the chunk holding them durably"},
	{"skip the active chunk's sync when it closes", "internal/chunkwriter/writer.go", "func (w *Writer) Close(", "w.active.Sync()", "error(nil)",
		"a chunk closed holds its journaled records durably"},
	{"skip the chunk's sync after cutting journaled bytes back", "commit.go", "func (h *openSession) cutJournaled(", "lc.Sync()", "error(nil)",
		"a chunk cut back after a failed journal commit is durable at its cut end"},
	{"skip the local sync of a remote session's commit group", "remote.go", "func (c *remoteChunk) syncPending(", "if err := c.activeChunk.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"a remote session's directory keeps what it held at a clean release"},
	{"forget a session's records without replaying a dead journal", "internal/journal/takeover.go", "func TakeOver(", "applied, err := applyDead(ctx, fsys, root, owner, filepath.ToSlash(r)+\"/\", dead)", "applied, err, _, _ := true, error(nil), r, dead",
		"a session whose writer died opens with every record its journal holds"},
	{"skip the directory sync after creating a chunk", "internal/seam/local.go", "func (l *Local) CreateChunk(", "l.FS.SyncDir(l.ChunkDir())", "error(nil)",
		"a new chunk's name is durable before a record is written to it"},
	{"skip the blob file's sync", "internal/blob/blob.go", "func syncAll(", "err := f.Sync()", "err := error(nil)",
		"a blob is durable before the event naming it is written"},
	{"skip the blob directories' syncs", "internal/blob/blob.go", "func syncAll(", "dirErrs <- fsys.SyncDir(d)", "dirErrs <- func(string) error { return nil }(d)",
		"a blob's name is durable before the event naming it is written"},
	// Sealing.
	{"skip the sealed chunk's sync", "internal/zchunk/zchunk.go", "func write(", "f.Sync()", "error(nil)",
		"a sealed chunk is durable before the plain one is removed"},
	{"skip the directory sync after the sealed chunk's rename", "internal/zchunk/zchunk.go", "func write(", "fsys.SyncDir(dir)", "error(nil)",
		"a sealed chunk's name is durable before the plain one is removed"},
	{"remove the plain chunk before sealing it", "internal/seam/local.go", "func (l *Local) SealChunk(",
		"if err := zchunk.WriteBlocks(l.FS, path+layout.SealedExt, data, lines, l.Perm, SealBlockSize); err != nil {",
		"if err := func() error { _ = durable.RemoveFile(l.FS, path); return zchunk.WriteBlocks(l.FS, path+layout.SealedExt, data, lines, l.Perm, SealBlockSize) }(); err != nil {",
		"the plain chunk goes only once its sealed copy is durable"},
	{"rewrite the index in place after sealing", "internal/index/file.go", "func (x *File) Reset(",
		"err := durable.ReplaceFile(x.fsys, filepath.Dir(x.path), filepath.Base(x.path), x.buf, x.perm)",
		"_, _ = filepath.Dir, durable.ReplaceFile // still imported\n\terr := func() error {\n\t\tif err := x.f.Truncate(0); err != nil {\n\t\t\treturn err\n\t\t}\n\t\t_, err := x.f.WriteAt(x.buf, 0)\n\t\treturn err\n\t}()",
		"a crash during the rewrite leaves index.jsonl's old lines or its new ones, never old lines after new ones"},
	// Atomic replaces: HEAD, session.json, sessionstore.json.
	{"skip the temporary file's sync in a replace", "internal/durable/durable.go", "func ReplaceFileAs(", "f.Sync()", "error(nil)",
		"a replaced file is whole after a crash"},
	{"skip the directory sync after a replace", "internal/durable/durable.go", "func ReplaceFileAs(", "return fsys.SyncDir(dir)", "return nil",
		"a replaced file's new content is durable when the call returns"},
	{"rename before the temporary file is synced", "internal/durable/durable.go", "func ReplaceFileAs(",
		"\tif err := f.Sync(); err != nil {\n\t\tf.Close()\n\t\treturn err\n\t}\n\tif err := f.Close(); err != nil {\n\t\treturn err\n\t}\n\tif err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {\n\t\treturn err\n\t}",
		"\tif err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {\n\t\treturn err\n\t}\n\tif err := f.Sync(); err != nil {\n\t\tf.Close()\n\t\treturn err\n\t}\n\tif err := f.Close(); err != nil {\n\t\treturn err\n\t}",
		"a replaced file is whole after a crash"},
	{"write session.json in place", "internal/seam/local.go", "func (l *Local) PutMeta(",
		"durable.ReplaceFile(l.FS, l.Dir, layout.MetaFile, b, l.Perm)", inPlace("l.FS", "l.Dir", "layout.MetaFile", "b", "l.Perm"),
		"a crash leaves the old metadata or the new, whole"},
	{"write HEAD in place", "internal/headfile/headfile.go", "func Write(",
		"durable.ReplaceFile(fsys, dir, Name, Encode(id), perm)", keeping("durable.ReplaceFile", inPlace("fsys", "dir", "Name", "Encode(id)", "perm")),
		"a crash leaves the old HEAD or the new, whole (or a torn one that is rebuilt, kept aside)"},
	{"skip the sessions directory sync of Create", "session.go", "func (s *Store) createNow(", "s.sessionsSync.Do(func() error { return s.opts.fs.SyncDir(filepath.Join(s.dir, sessionsDir)) })", "error(nil)",
		"a created session's directory is durable when Create returns"},
	{"serve a caller with a run that began before it", "internal/durable/coalesce.go", "func (c *Coalescer) Do(",
		"\tc.mu.Lock()\n\tc.next = nil // from here on, callers need the next run\n\tc.mu.Unlock()\n\tr.err = fn()\n",
		"\tr.err = fn()\n\tc.mu.Lock()\n\tc.next = nil // from here on, callers need the next run\n\tc.mu.Unlock()\n",
		"one sync of the sessions directory or the catalogue log serves only the callers whose change came before it began"},
	// Workspaces (workspace_restore.go, internal/workspace).
	{"skip the sync of a restored file", "internal/workspace/write.go", "func (w *Writer) Write(", "err = f.Sync()", "err = error(nil)",
		"a file Restore wrote is whole after a crash"},
	{"skip the directory syncs of a Restore", "internal/workspace/write.go", "func (w *Writer) Finish(", "w.fsys.SyncDir(w.abs(d))", "error(nil)",
		"the renames and removals of a Restore that returned are durable"},
	{"skip the sync of the parent of a directory Restore made", "workspace_restore.go", "func (s *Store) Restore(", "fsys.SyncDir(filepath.Dir(d))", "func(string) error { return nil }(filepath.Dir(d))",
		"a directory Restore made is durable when it returns"},
	{"GC reads no workspace manifest", "blob.go", "func (s *Store) GCWith(", "s.manifestBlobs(ctx, h, referenced)", "error(nil)",
		"GC keeps every content a manifest names"},
	{"record a racy file's time", "workspace.go", "func (s *Store) SnapshotDir(", "if start.Sub(time.Unix(0, mtime)) <= racy {", "if false {",
		"a file rewritten in the clock tick of the last snapshot is read again"},
	{"write a restored file without confinement", "internal/workspace/write.go", "func NewWriter(", "fsys: vfs.Confine(fsys, dir)", "fsys: fsys",
		"Restore follows no link out of its directory"},
	{"keep the files a delta removes", "workspace.go", "func applyDelta(", "if !d.Deleted {", "if true {",
		"a file a snapshot found removed is gone from the workspace after it"},
	{"Reencrypt checks the workspace marker only before the lock", "upgrade.go", "func (s *Store) rewriteSession(", "\tif job.reseal {\n\t\tif _, err := fsys.Stat(filepath.Join(dir, workspaceMarker)); err == nil {", "\tif false {\n\t\tif _, err := fsys.Stat(filepath.Join(dir, workspaceMarker)); err == nil {",
		"a snapshot that began before a Reencrypt makes it refuse, not seal its contents away"},
	{"accept an application record in the store's reserved form", "event.go", "func prepareRecord(", "!ev.reserved && bytes.HasPrefix(rec, []byte(reservedMark))", "false",
		"no application record can pass for a manifest or a state delta"},
	{"skip syncing a new root", "store.go", "func Open(", "o.fs.SyncDir(dir)", "error(nil)",
		"a new store's directories are durable when Open returns"},
	{"skip syncing a new root's parent", "store.go", "func Open(", "o.fs.SyncDir(filepath.Dir(dir))", "error(nil)",
		"a new store's directory is durable when Open returns"},
	// The catalogue (internal/catalogue).
	{"skip the sync of a catalogue pending record", "internal/catalogue/catalogue.go", "func (c *Catalogue) syncLog(",
		"if err := f.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"a crash between a pending record and its commit leaves List reading session.json"},
	{"take the catalogue log as the last batch left it without looking", "internal/catalogue/catalogue.go", "func (c *Catalogue) current(",
		"if c.unchanged(f, k) {", "if f != nil {",
		"a writer appends after the other writers' records, never over them"},
	{"fold a snapshot of another generation", "internal/catalogue/fold.go", "func foldSnapshot(",
		"h.Kind != KindHeader || h.Gen != l.Gen", "h.Kind != KindHeader",
		"the log's compaction folds it into the snapshot it belongs to"},
	{"copy snapshot lines without checking their frame", "internal/catalogue/fold.go", "func catLineID(",
		"if jsonl.Verify(line) != nil {", "if false {",
		"the log's compaction copies no damaged line"},
	{"trust a catalogue entry with a pending record", "internal/catalogue/state.go", "func (st *State) Lookup(",
		"if st.log.pending[id] {", "if false {",
		"an id being written is read from session.json"},
	{"list a session being written from the catalogue", "internal/catalogue/state.go", "func (st *State) Each(",
		"case st.log.pending[id]:", "case false:",
		"List on a current catalogue reads a session with a pending record from session.json"},
	{"list from the catalogue whatever the sessions directory's stamp", "internal/catalogue/state.go", "func (l *catLog) current(",
		"!l.tail && d == l.Dir", "!l.tail && d == d",
		"List reads the sessions directory once it changed behind the catalogue"},
	{"list from a catalogue log with an ignored tail", "internal/catalogue/state.go", "func (l *catLog) current(",
		"!l.tail && d == l.Dir", "d == l.Dir",
		"a damaged byte that joins the log's last lines does not make the listings return the entry before them"},
	{"trust a catalogue entry whatever session.json's stamp", "internal/catalogue/state.go", "func (e Entry) Fresh(",
		"err == nil && st == e.File {", "err == nil && st == st {",
		"a session.json changed behind the catalogue is read"},
	{"answer ListRecent whatever the sessions directory's stamp", "internal/catalogue/backwards.go", "func (c *Catalogue) openBackwards(",
		"serr != nil || !l.current(d) {", "serr != nil || !l.current(l.Dir) && d == d {",
		"a session directory added behind the catalogue is listed"},
	{"accept a catalogue log of another generation", "internal/catalogue/state.go", "func Load(",
		"if l.Gen != snap.Gen {", "if false {",
		"a crash between the catalogue's two renames is not read as a catalogue"},
	// Flush and GC.
	{"skip the index sync of Flush", "commit.go", "func (h *openSession) flush(", "h.index.Sync()", "error(nil)",
		"after Flush a crash has nothing to rebuild"},
	{"skip the index file's fdatasync", "internal/index/file.go", "func (x *File) Sync(", "x.f.Sync()", "error(nil)",
		"after Flush a crash has nothing to rebuild"},
	{"skip the directory sync after GC's removals", "internal/blob/gc.go", "func Sweep(", "fsys.SyncDir(filepath.Join(root, sub))", "error(nil)",
		"GC's removals are durable when it returns"},
	{"collect the blobs kept-aside bytes name", "blob.go", "func (s *Store) GCWith(",
		"blob.KeptAside(fsys, h.dir, referenced)", "blob.KeptAside(fsys, h.dir, map[[32]byte]bool{})",
		"GC keeps the blobs of records a repair kept aside"},
	// Reconciliation.
	{"skip syncing records found after the last index line", "internal/recovery/apply.go", "func Apply(",
		"durable.SyncFile(fsys, filepath.Join(chunkDir, layout.ChunkName(newest)))", "error(nil)",
		"an index line or HEAD names only durable records"},
	{"skip the directory sync after finishing an interrupted HEAD replace", "internal/recovery/apply.go", "func Apply(",
		"fsys.SyncDir(dir)", "error(nil)",
		"each repair is synced"},
	{"keep no cut bytes aside", "internal/recovery/apply.go", "func cutTail(", "writeSynced(fsys, keep, tail, perm)", "func() error { _ = tail; return nil }()",
		"the bytes a repair cuts are kept"},
	{"skip the sync of a kept-aside file's bytes", "internal/recovery/apply.go", "func writeSynced[", "if err := w.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"the bytes a repair cuts are kept, whole, under their name"},
	{"skip the directory sync of a kept-aside file", "internal/recovery/apply.go", "func writeSynced[", "return fsys.SyncDir(filepath.Dir(path))", "return nil",
		"the bytes a repair cuts are kept under a durable name before the cut"},
	{"make directories without syncing their names", "internal/durable/durable.go", "func MkdirAll(", "if err := fsys.SyncDir(filepath.Dir(d)); err != nil {", "if err := func(string) error { return nil }(filepath.Dir(d)); err != nil {",
		"a file the store syncs is never left out of every directory by a crash"},
	{"skip the directory sync after moving a bad HEAD aside", "internal/recovery/apply.go", "func Apply(", "fsys.SyncDir(filepath.Dir(p.HeadKeep))", "error(nil)",
		"a bad HEAD is kept aside before a new one replaces it"},
	{"skip the fdatasync of syncFile", "internal/durable/durable.go", "func SyncFile(", "return errors.Join(f.Sync(), f.Close())", "return f.Close()",
		"an index line or HEAD names only durable records"},
	{"skip the sync after cutting a torn tail", "internal/recovery/apply.go", "func cutTail(", "return f.Sync()", "return nil",
		"each repair is synced"},
	{"cut no torn tail", "internal/recovery/apply.go", "func Apply(", "cutTail(fsys, p.TornPath, p.ActiveSize, p.TornKeep, perm)", "error(nil)",
		"a torn tail is cut before the next record is written"},
	{"skip the sync of the index rewrite", "internal/recovery/apply.go", "func rewriteIndexTail(", "f.Sync()", "error(nil)",
		"each repair is synced"},
	{"cut the index in place in a repair", "internal/recovery/apply.go", "func rewriteIndexTail(",
		"return int64(len(buf)), durable.ReplaceFile(fsys, filepath.Dir(path), filepath.Base(path), buf, perm)",
		"return int64(len(buf)), " + keeping("durable.ReplaceFile", "func() error {\n\t\t\tif err := f.Truncate(end); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n\t\t\tif _, err := f.WriteAt(buf[end:], end); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n\t\t\treturn f.Sync()\n\t\t}()"),
		"a crash during a repair's index rewrite leaves the old index or the new one, never old lines after new ones"},
	{"skip the directory sync of a removal", "internal/durable/durable.go", "func RemoveFile(", "return fsys.SyncDir(filepath.Dir(path))", "return nil",
		"each repair is synced"},
	{"take any damaged end of the log for a lost tail", "internal/recovery/analyze.go", "func (p *Plan) checkLast(", "!r.DamagedAt(e.Loc)", "false",
		"a complete record that is invalid is corruption, never cut"},
	// Checks.
	{"skip the checksum of lines", "internal/jsonl/frame.go", "func Verify(", "Checksum(line[:cut]) != want", "false",
		"damage is detected, never read as data"},
	{"skip the digest check of blobs", "internal/blob/blob.go", "func DecodeWith(", "sha256.Sum256(rec) != d || int64(len(rec)) != size", "sha256.Sum256(rec) != sha256.Sum256(rec)",
		"a damaged blob is detected"},
	{"report a parent deleted during Fork's read as its missing file", "fork.go", "func (s *Store) forkParent(", "errors.Is(serr, fs.ErrNotExist) {", "false && errors.Is(serr, fs.ErrNotExist) {",
		"a Fork that loses to a Delete of its parent answers ErrNotFound"},
	{"report a session's lock held at the first try", "internal/registry/lock.go", "func Lock(", "if time.Now().After(graceEnd) || ctx.Err() != nil {", "if _ = graceEnd; true {",
		"a lock a spawned child holds for an instant is taken"},
	{"skip the whole record's check of a split blob", "internal/blob/strings.go", "func decodeSplit(", "sha256.Sum256(rec) != d || int64(len(rec)) != size", "sha256.Sum256(rec) != sha256.Sum256(rec)",
		"a split blob whose table puts a string in the wrong place is refused"},
	{"skip the string table's checksum", "internal/blob/strings.go", "func parseTable(", "if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(payload[len(payload)-4:]) {", "if false {",
		"a damaged string table is refused, naming the split blob"},
	{"let GC remove the strings of split blobs it keeps", "internal/blob/gc.go", "func Sweep(", "ok && (keep(d) || strs[d])", "ok && keep(d)",
		"GC keeps every string a kept split blob names"},
	{"split records in a format 2 session", "append.go", "func (p *pendingEvent) isBlob(", "if format < splitFormat {", "if false {",
		"a session an older build reads gets no split blob"},
	{"store every string apart", "internal/blob/strings.go", "func Strings(", "if n := j - start; n >= min {", "if n := j - start; n >= 0 {",
		"only strings of the threshold are stored apart"},
	// Object storage.
	{"acknowledge before the object store has the commit group", "remote.go", "func (c *remoteChunk) syncPending(", "return pending, nil", "if pending != nil {\n\t\tgo pending()\n\t}\n\treturn nil, nil",
		"acknowledged means remote"},
	{"take a full listing page for all the ids below the cursor", "list_remote.go", "func metaKeysBefore(", "reached = len(infos) < listPageAfterPage", "reached = true",
		"a page of ListPage holds every session below its cursor, newest first, however dense the ids"},
	{"fork at an event acknowledged after the local sync without waiting for its Create", "fork.go", "func (s *Store) forkParent(", "if ok && rf != nil {", "if false && ok && rf != nil {",
		"a fork's prefix is read from the log: its fork point must be stored first"},
	{"leave a failed Create's acknowledged events to the session's next call", "remote.go", "func newRemoteFiles(", "if r.ackLocal && o.recoverTail != nil {", "if false {",
		"a healthy Store stores what it acknowledged after a failed Create, though no call of the session comes"},
	{"skip the local sync of a commit group acknowledged after it", "remote.go", "func (c *remoteChunk) syncLocal(", "if err := c.activeChunk.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"DurableLocal acknowledges a group once the local chunk holds it durably: a power loss keeps it"},
	{"cut the unstored tail of a lease that acknowledged after the local sync", "remote.go", "func (r *remoteFiles) acquire(", "r.keepTail = !v.Clean()", "r.keepTail = false && !v.Clean()",
		"events acknowledged after the local sync and not stored are stored by the next open in the same directory"},
	{"start a chunk or a sealing with acknowledged groups not stored", "remote.go", "func (r *remoteFiles) settleLocal(", "if !r.ackLocal {", "if true {",
		"the groups acknowledged after the local sync and not stored all lie in the newest chunk, plain, where the next open keeps them"},
	{"keep the unstored tail without storing it", "remote.go", "func (r *remoteFiles) storeTail(", "if t.End <= t.Off {", "if true {",
		"an open stores the acknowledged tail before anything else, so that other Stores see it"},
	{"record no Local in a lease's markers", "internal/seam/writer.go", "func (l *LogWriter) PutLocked(", "h.Local = l.Local", "h.Local = false",
		"an open knows that the lease it takes over acknowledged after the local sync"},
	{"delete dead data objects instead of replacing them by tombstones", "remote.go", "func (r *remoteFiles) deleteDying(", "r.Obj.Put(ctx, seam.LogKey(r.ID, seq), tomb)", "r.Obj.Delete(ctx, seam.LogKey(r.ID, seq+0*uint64(len(tomb))))",
		"no log number is ever freed, so that a taker stalled between its listing and its Create cannot land in one"},
	{"skip log objects missing after the newest marker", "internal/seam/view.go", "func missingObject(", "if o.seq > marker && o.seq >= maxSeal {", "if false && o.seq > marker && o.seq >= maxSeal {",
		"a log object lost by the object store is a *CorruptionError naming its key, never a silent cut of acknowledged events"},
	{"take a gap in the log's listing for a whole log", "internal/seam/view.go", "func (l *LogWriter) buildView(", "if seq >= gap+mh.MaxInFlight() || g.h.Acked >= gap {", "if false {",
		"a log object the listing skips (lost by the object store) is a *CorruptionError naming its key"},
	{"a missing data object the log's state names is a remote failure", "remote_restore.go", "func (r *remoteFiles) rebuildPlain(", "if errors.Is(err, ErrObjectNotFound) {", "if false {",
		"a data object the log's state names and the object store lost is a *CorruptionError naming its key"},
	{"skip the sync of a restored chunk", "remote_restore.go", "func (r *remoteFiles) rebuildPlain(", "if err := f.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"the local files hold what remote.json says they held, after a crash"},
	{"skip the chunks directory sync after creating a restored chunk", "remote_restore.go", "func (r *remoteFiles) rebuildPlain(", "if err := fsys.SyncDir(r.ChunkDir()); err != nil {", "if err := error(nil); err != nil {",
		"a restored chunk's bytes are never on the disk without a name"},
	{"skip the sync of a downloaded sealed chunk", "internal/seam/remotefiles.go", "func writeTemp(", "if err := f.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"a downloaded sealed chunk is whole under its name after a crash"},
	{"skip the directory sync after a downloaded sealed chunk's rename", "internal/seam/remotefiles.go", "func DownloadSealed(", "return int64(len(b)), fsys.SyncDir(filepath.Dir(path))", "return int64(len(b)), nil",
		"a downloaded sealed chunk's bytes are never on the disk without a name"},
	{"vouch for no sealed chunk file", "remote_restore.go", "func (r *remoteFiles) reconcileLocal(",
		"vouched = func(c uint32) bool { return c <= through }", "vouched = func(c uint32) bool { return false && c <= through }",
		"an open of a session its directory released cleanly reads no sealed chunk file per chunk"},
	{"vouch for sealed chunk files whatever the log's seals", "remote_restore.go", "func (r *remoteFiles) reconcileLocal(",
		"if ls.SealedDigest != \"\" && sealedDigest(v.State.Sealed, ls.SealedThrough) == ls.SealedDigest {", "if ls.SealedDigest != \"\" {",
		"a local sealed chunk file is trusted only for the seals remote.json vouched for"},
	{"vouch for sealed chunk files beyond the release's", "remote_restore.go", "func (r *remoteFiles) reconcileLocal(",
		"vouched = func(c uint32) bool { return c <= through }", "vouched = func(c uint32) bool { return c <= through || true }",
		"a local sealed chunk file is trusted only for the seals remote.json vouched for"},
	// Followers and streams from an offset.
	{"a follower looks at the log only when it opens a session", "registry.go", "func (r *registry) acquireOpen(", "if err := h.follow(ctx); err != nil {", "if err := error(nil); err != nil {",
		"each call of a follower sees every event appended before it"},
	{"a follower reads the log from its newest marker at every look", "follow.go", "func (r *remoteFiles) readFollowView(", "v, err := r.ExtendView(ctx, prev)", "v, err := r.ExtendView(ctx, nil)",
		"a follower's look reads only the objects created since its last"},
	{"an extended view forgets the payloads of objects not applied yet", "internal/seam/view.go", "func (l *LogWriter) ExtendView(", "if o.h.Kind == KindData && seq <= prev.Applied {", "if o.h.Kind == KindData {",
		"an extended view carries every data object it applies that the previous did not"},
	{"a follower delivers the same events again", "follow.go", "func (s *Store) deliverFollowed(", "t.followed = h.Entries[end-1].ID", "_ = h.Entries[end-1].ID",
		"a follower's subscribers get each event once"},
	{"a stream from an offset replays the offset's event too", "stream.go", "func (s *Store) subscribe(", "start = int(i) + 1", "start = int(i)",
		"SubscribeFrom delivers the events after its offset"},
	// The object store's GC.
	{"collect objects younger than the lease", "gc_remote.go", "func (r *remoteFiles) sweep(", "old := func(o seam.ObjectInfo) bool { return now.Sub(o.ModTime) >= r.leaseT }", "old := func(o seam.ObjectInfo) bool { return now == now }",
		"GC keeps an object younger than the lease, which an upload in flight may be"},
	{"collect the strings of the split blobs kept", "gc_remote.go", "func (r *remoteFiles) sweep(", "keep[ref.Digest] = true", "_ = ref.Digest",
		"GC keeps the strings of every split blob an event names"},
	{"collect sealed chunks a seal record names", "gc_remote.go", "func (r *remoteFiles) sweep(", "if !named[o.Key] && !strings.Contains(o.Key, own) && old(o) {", "if !strings.Contains(o.Key, own) && old(o) {",
		"GC keeps every sealed chunk the log names"},
	{"collect without checking the session is still held", "gc_remote.go", "func (r *remoteFiles) sweep(", "if err := r.stillHolds(ctx); err != nil {", "if err := error(nil); err != nil {",
		"a Store that lost the session removes nothing from the object store"},
	{"a dry run of GC removes objects", "gc_remote.go", "func (r *remoteFiles) sweep(", "\tif dry {\n", "\tif false {\n",
		"GC's dry run removes nothing"},
	{"a remote page reads every session's metadata", "list.go", "func (s *Store) listPage(", "if s.opts.Remote != nil {\n\t\t\titems, cost, err = s.listPageRemote(", "if false {\n\t\t\titems, cost, err = s.listPageRemote(",
		"with a remote, a page of ListPage reads about its own sessions' metadata"},
	{"end the subscriptions while Close holds its lock", "store.go", "func (s *Store) Close(", "\ts.closeMu.Unlock()\n\t// The subscriptions", "\ts.hub.close()\n\ts.closeMu.Unlock()\n\t// The subscriptions",
		"Close does not wait for a replay that waits for Close"},
	{"a follower's look drops the deferred downloads", "remote_restore.go", "func (r *remoteFiles) reconcileLocal(", "if !r.appendOnly {\n\t\tr.fetch.forget(cdir)", "if true {\n\t\tr.fetch.forget(cdir)",
		"a follower's look leaves the sealed chunks a walk beside it may be reading"},
	// Fork against Delete across roots.
	{"a Fork reads no delete intent", "remote_forks.go", "func (s *Store) checkRemoteParent(", "if intent.present && intent.age < s.opts.LeaseTime {", "if false && intent.present {",
		"a Fork made while a Delete of its parent is under way on another root fails"},
	{"a Delete looks for no fork made on another root", "remote_forks.go", "func (s *Store) beginRemoteDelete(", "if err := s.checkRemoteForks(ctx, id); err != nil {", "if err := error(nil); err != nil {",
		"a Delete refuses a parent whose fork another root registered"},
	{"a Delete commits with a stale intent", "remote_forks.go", "func (s *Store) freshIntent(", "if err != nil || intent.mine && intent.age < s.opts.LeaseTime/2 {", "if err != nil || intent.present {",
		"a Delete that waited past half the lease looks for forks again before its marker"},
	{"a Fork reads the parent before its delete intent", "remote_forks.go", "func (s *Store) checkRemoteParent(",
		"\tintent, err := s.readIntent(ctx, parent)\n\tif err != nil {\n\t\treturn err\n\t}\n\tif intent.present && intent.age < s.opts.LeaseTime {\n\t\treturn fmt.Errorf(\"%w: a Delete of session %s is under way\", ErrLocked, parent)\n\t}\n\tif _, err := s.metaRemote(ctx, parent); errors.Is(err, ErrNotFound) {\n\t\treturn errForkParentGone\n\t} else if err != nil {\n\t\treturn err\n\t}\n", "if _, err := s.metaRemote(ctx, parent); errors.Is(err, ErrNotFound) {\n\t\treturn errForkParentGone\n\t} else if err != nil {\n\t\treturn err\n\t}\n\tintent, err := s.readIntent(ctx, parent)\n\tif err != nil {\n\t\treturn err\n\t}\n\tif intent.present && intent.age < s.opts.LeaseTime {\n\t\treturn fmt.Errorf(\"%w: a Delete of session %s is under way\", ErrLocked, parent)\n\t}\n",
		"a Fork reads the intent first: a committed Delete removes it after its marker"},
	{"GC removes under a lease idle for half of it", "gc_remote.go", "func (r *remoteFiles) stillHolds(", "if idle := now.Sub(last); idle >= r.leaseT/2 {", "if idle := now.Sub(last); idle < 0 {",
		"GC collects only under a lease written or renewed within half of it"},
	{"a remote page skips a session whose copy was replaced", "remote.go", "func (s *Store) readRemoteMetas(", "if errors.Is(err, ErrObjectNotFound) {\n\t\t\t// Replaced", "if false {\n\t\t\t// Replaced",
		"a session whose metadata changed while a page was read is on the page"},
	{"GC reads a kept blob's strings from the local file", "gc_remote.go", "func (r *remoteFiles) sweep(",
		"refs, err := blob.TableRefs(o.Key, func(off, n int64) ([]byte, error) {\n\t\t\tb, err := r.Obj.Get(ctx, o.Key, off, n)\n\t\t\tif err != nil {\n\t\t\t\treturn nil, seam.RemoteErr(\"get\", o.Key, err)\n\t\t\t}\n\t\t\treturn b, nil\n\t\t})",
		"refs, err := blob.FileRefs(r.FS, r.Dir, d)\n\t\tif err != nil {\n\t\t\trefs, err = nil, nil\n\t\t}",
		"GC keeps the strings a kept blob's object names, whatever the local file's form"},
	{"a taker trusts its marker without checking it is the newest", "internal/seam/compact.go", "func (l *LogWriter) CheckNewestLocked(", "if len(seqs) > 0 && seqs[len(seqs)-1] > l.Seq {", "if false && len(seqs) > 0 && seqs[len(seqs)-1] > l.Seq {",
		"a taker whose marker landed in a number compaction freed reads the log again"},
	{"a takeover keeps no numbers of the holder it took over", "remote.go", "func (r *remoteFiles) take(", "st.Keep = append(st.Keep, seam.KeepRange(v.NewestSeq+1, staleWindow(v)))", "_ = st",
		"compaction never frees a number a zombie may still Create"},
	{"compaction deletes the data objects the state names", "internal/seam/compact.go", "func (st *State) Keeps(", "return inRanges(st.Keep, seq) || st.names(seq)", "return inRanges(st.Keep, seq)",
		"compaction keeps every data object a reader needs"},
	{"compaction never comes back for an object that died later", "internal/seam/compact.go", "func (l *LogWriter) Compact(", "stats.From = min(stats.From, seq)", "_ = seq",
		"a data object kept by one compaction is deleted by a later one once it died"},
	{"a reader takes objects deleted under it for an earlier build's deletions", "internal/seam/view.go", "func (l *LogWriter) ReadView(", "if anyGone && l.Moved(ctx, listed) {", "if false && anyGone && l.Moved(ctx, listed) {",
		"a reader whose listing a compaction overtook reads the log again"},
	{"a reader's full listing puts objects it never read in its view", "internal/seam/view.go", "func (l *LogWriter) ReadView(", "seqs, objs = append(seqs[:end:end], pageSeqs...), append(objs[:end:end], pageObjs...)", "_, _ = pageSeqs, pageObjs",
		"a view holds only objects its reader read"},
	{"compaction runs despite RemoteKeepLog", "remote.go", "func (r *remoteFiles) startCompaction(", "if r.keepLog || !seam.CompactDue(st, below) {", "if !seam.CompactDue(st, below) {",
		"RemoteKeepLog deletes no log object"},
	{"report a blob a concurrent read completed as missing", "remote.go", "func (s *Store) fetchMissingBlob(", "if !blob.Incomplete(s.opts.fs, dir, d) {\n\t\treturn true, nil", "if !blob.Incomplete(s.opts.fs, dir, d) {\n\t\treturn false, nil",
		"a read that found a string absent reads again once another read fetched it"},
	{"download a path's chunks one at a time", "remote_fetch.go", "func (f *fetchFS) prefetch(", "for range min(prefetchers, len(jobs)) {", "for range 1 {",
		"a restore downloads the chunks its path crosses side by side"},
	{"take an existing log object for this writer's", "internal/seam/writer.go", "func (l *LogWriter) create(", "err := l.Obj.Create(ctx, key, b)", "err := l.Obj.Create(ctx, key, b)\n\tif errors.Is(err, ErrObjectExists) {\n\t\terr = nil\n\t}",
		"a writer that lost the session is fenced"},
	{"skip the lease renewal of an idle holder", "remote.go", "func (r *remoteFiles) renewLease(", "due := r.Holder && r.Lost == nil", "due := false && r.Holder && r.Lost == nil",
		"an idle holder keeps its session"},
	{"ignore the newest lease's renewal", "internal/seam/writer.go", "func (l *LogWriter) HolderIdle(", "return min(idle, now.Sub(info.ModTime)), nil", "return max(idle, now.Sub(info.ModTime)), nil",
		"a renewal delays a takeover"},
	{"renew a lease another Store took over", "internal/seam/writer.go", "func (l *LogWriter) Renew(", "if newest > l.Issued && l.Lost == nil {", "if newest < 0 && l.Lost == nil {",
		"a holder that lost the session learns it when renewing"},
	// Several log objects in flight.
	{"acknowledge a data object before the ones before it are stored", "internal/seam/writer.go", "func (l *LogWriter) PutData(", "for l.Seq < seq && (l.failedAt == 0 || l.failedAt > seq) {", "for false {",
		"a commit group is acknowledged once it and every group before it are stored"},
	{"fill no free number before a taking marker", "remote.go", "func (r *remoteFiles) take(", "if err := r.FillGaps(ctx, v, lease); err != nil {", "if err := error(nil); err != nil {",
		"a Create of the earlier holder still in flight cannot land before the marker and be acknowledged"},
	{"fill no number after a taking marker", "remote.go", "func (r *remoteFiles) take(", "fills = int(staleWindow(v)) - 1", "fills = 0 * int(staleWindow(v))",
		"a late Create of the earlier holder does not fence the Store that took the session"},
	{"skip another lease's void in a view", "internal/seam/view.go", "func (l *LogWriter) buildView(", "if ok && g.h.Lease != mh.Lease && g.h.Kind != KindDead && (gap == 0 || seq < gap) &&", "if false && ok &&",
		"an object after a number another Store filled is never applied"},
	{"skip another lease's object past the numbers the marker's Store filled", "internal/seam/view.go", "func (l *LogWriter) buildView(", "(g.h.Kind == KindVoid || seq > seqs[marker]+uint64(mh.Fills)) {", "(g.h.Kind == KindVoid || seq > seqs[marker]+uint64(mh.Fills)+1<<20) {",
		"a fenced taker's objects after an earlier lease's late Create are never applied"},
	{"record only the lease's own window in its markers", "internal/seam/writer.go", "func (l *LogWriter) PutLocked(", "h.Window = int(max(uint64(l.window()), l.Carry))", "h.Window = int(max(uint64(l.window()), 0*l.Carry))",
		"a taker fills enough numbers after a lease of a smaller window took over from a larger one"},
	{"skip a marker found by a fill after a taking marker", "internal/seam/writer.go", "func (l *LogWriter) FillLocked(", "if derr != nil || IsMarker(h.Kind) || h.Kind == KindVoid {", "if derr != nil || h == nil {",
		"a taker that another Store took the session from is fenced"},
	{"publish a group before the groups written before it", "internal/commit/pipeline.go", "func (p *Pipeline[R]) publishFlight(", "for len(p.flight) > 0 && p.flight[0].stored {", "for len(p.flight) > 0 && true {",
		"groups are acknowledged in the order they were written"},
	// The lifecycle.
	{"skip the subdirectories' sync of Create", "session.go", "func createSessionFiles(", "if err := fsys.SyncDir(dir); err != nil {", "if err := error(nil); err != nil {",
		"a created session's chunks directory is durable before session.json names it"},
	{"change lanes without waiting for the appends in flight", "lanes.go", "func (h *openSession) changeLanes(", "if err := h.settle(); err != nil {", "if err := error(nil); err != nil {",
		"a switch takes effect after the appends already under way, which are not undone by it nor undo it"},
	{"write lanes.json in place", "internal/seam/local.go", "func (l *Local) PutLanes(",
		"durable.ReplaceFile(l.FS, l.Dir, layout.LanesFile, b, l.Perm)", inPlace("l.FS", "l.Dir", "layout.LanesFile", "b", "l.Perm"),
		"a crash leaves the old lanes or the new, whole"},
	{"take a caller's id stored with another record as a retry", "retry.go", "func (h *openSession) sameContent(", "if !same {\n\t\t\treturn differ(\"record\")\n\t\t}\n\t}\n\tev.Record", "if !same && false {\n\t\t\treturn differ(\"record\")\n\t\t}\n\t}\n\tev.Record",
		"a retry with other content is a conflict, never the stored event"},
	{"a retry does not wait for its original in flight", "retry.go", "func retryCheck(", "h.pipe.WaitSync()\n\t\t\t\treturn errRecheck", "break",
		"a retry racing its original stores one event and never acknowledges one that is not durable"},
	{"skip the sessions directory sync after a Delete's move", "delete.go", "func moveToTrash(", "if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {", "if err := error(nil); err != nil {",
		"a session Delete returned nil for is gone after a crash"},
	{"skip the root's sync after creating the trash", "delete.go", "func moveToTrash(", "if err := fsys.SyncDir(root); err != nil {", "if err := error(nil); err != nil {",
		"a crash during a Delete leaves the session's files reachable, whole where they were or in the trash"},
	{"skip the trash's sync after a Delete's move", "delete.go", "func moveToTrash(", "return true, fsys.SyncDir(trash)", "return true, nil",
		"a Delete's move is durable in both directories, synced one right after the other"},
	{"skip the trash's sync after a Delete's removals", "delete.go", "func (s *Store) deleteSession(", "if err := fsys.SyncDir(trash); err != nil {", "if err := error(nil); err != nil {",
		"a session Delete returned nil for is gone after a crash, its files in no directory"},
	{"skip the directory syncs of a removal of a tree", "delete.go", "func removeTree(", "if err := fsys.SyncDir(levels[d][i]); err != nil && !errors.Is(err, fs.ErrNotExist) {", "if err := error(nil); err != nil {",
		"a deleted session's files are not left on the disk out of every directory"},
	{"skip the trash's sync after emptying it", "trash.go", "func (s *Store) emptyTrash(", "if err := fsys.SyncDir(trash); err != nil {", "if err := error(nil); err != nil {",
		"what a purge of the trash removed stays removed after a crash"},
	{"skip the sessions directory sync after an Undelete's rename", "trash.go", "func (s *Store) Undelete(", "if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {", "if err := error(nil); err != nil {",
		"a session Undelete returned nil for is back after a crash"},
	{"skip the trash's sync after an Undelete's rename", "trash.go", "func (s *Store) Undelete(", "if err := fsys.SyncDir(trash); err != nil {\n\t\t\treturn false, err\n\t\t}\n\t\t// An encrypted", "if err := error(nil); err != nil {\n\t\t\treturn false, err\n\t\t}\n\t\t// An encrypted",
		"a session Undelete returned nil for has left the trash after a crash"},
	{"skip the trash's sync after renaming entries for removal", "trash.go", "func (s *Store) doomTrash(", "if err := fsys.SyncDir(trash); err != nil {", "if err := error(nil); err != nil {",
		"a crash during a Purge never leaves a half-removed session under a name Undelete brings back"},
	{"remove trash entries before their purge time", "trash.go", "func (s *Store) expiredTrash(", "return now.Before(e.purgeAt)", "return now.Before(e.purgeAt) && false",
		"a deleted session stays in the trash for Options.TrashFor"},
	{"keep trash entries past their purge time", "trash.go", "func (s *Store) expiredTrash(", "return now.Before(e.purgeAt)", "return now.Before(e.purgeAt) || true",
		"the trash's expired sessions are removed"},
	{"undelete a fork whose parent is gone", "trash.go", "func (s *Store) Undelete(", "case errors.Is(err, fs.ErrNotExist):", "case false:",
		"a fork comes back only while its parent is in the store"},
	{"undelete onto a session created again", "trash.go", "func (s *Store) Undelete(", "case err == nil:", "case false:",
		"Undelete never replaces a session created since the delete"},
	{"trash a session without applying a dead writer's journal", "delete.go", "func (s *Store) deleteSession(", "if _, err := takeOver(ctx, fsys, s.dir, dir, s.opts.jr.current(), s.opts.FileMode, s.opts.dead); err != nil {", "if err := error(nil); err != nil {",
		"a session in the trash keeps every acknowledged event, those a dead writer's journal held too"},
	{"take every marked session for a fork", "forklock.go", "func (s *Store) liveForks(", "if m.ForkedFrom != nil && m.ForkedFrom.Session == id {", "if m.ID != uuid.Nil {",
		"a fork's marker outlives it; a session of its id created again is no fork"},
	{"undelete an entry without session.json", "trash.go", "func (s *Store) Undelete(", "if errors.Is(err, ErrNotFound) {\n\t\t\tcontinue\n\t\t}", "if errors.Is(err, ErrNotFound) {\n\t\t\terr = nil\n\t\t}",
		"Undelete brings back a session, never an entry that is none"},
	{"leave a directory a crashed Create left in Undelete's way", "trash.go", "func (s *Store) Undelete(", "if err := s.clearUnmadeSession(ctx, dir); err != nil {", "if err := error(nil); err != nil {",
		"a Create cut short does not keep a deleted session from coming back"},
	{"prune pinned sessions", "prune.go", "func (s *Store) prunePlan(", "case m.Pinned():", "case false:",
		"Prune never removes a pinned session"},
	{"prune recently used sessions", "prune.go", "func (s *Store) prunePlan(", "case p.KeepRecent > 0 && s.usedSince(", "case false && s.usedSince(",
		"Prune keeps the sessions used within KeepRecent"},
	{"open a session whose log ends with a delete marker", "remote.go", "func (r *remoteFiles) acquire(", "if v == nil || v.Deleted() {", "if v == nil {",
		"a session deleted on the object store is gone for every Store"},
	// Previews and the streaming forms.
	{"keep no preview in index lines", "internal/eventline/index.go", "func AppendIndex(", "obj = appendPreviewMember(obj, &e.Preview)", "obj = appendPreviewMember(obj, new(Preview))",
		"a node's preview survives a reopen without reading its record"},
	{"no preview for an entry rebuilt from its chunk line", "internal/eventline/index.go", "func NewEntry(", "if !p.Blob {", "if false {",
		"an entry rebuilt from an inline record's line has its preview"},
	{"read a moved batch at its old place", "seq.go", "func (h *openSession) relocate(", "if same {", "if true {",
		"a streaming form reads on when the session's lines move under it"},
	{"a hole after a bad line starts the invalid tail", "internal/chunk/walk.go", "func Walk(", "if w.Bad == sc.Offset() {\n\t\t\t\t\tw.BadErr = ErrHole", "{\n\t\t\t\t\tw.Bad, w.BadErr = sc.Offset(), ErrHole",
		"a garbled write before a hole is cut from its first bad line, as Verify sees it"},
	{"keep writing after the held index lines are lost", "lazy.go", "func (h *openSession) endAppending(", "if ierr != nil {\n\t\t// The index lines it held", "if false {\n\t\t// The index lines it held",
		"index.jsonl stays a prefix of the session's lines: no line is written after a lost one"},
	// The shared journal (internal/journal).
	{"journal: skip the root's sync after making the journal directory", "internal/journal/writer.go", "func Create(", "if err := fsys.SyncDir(root); err != nil {", "if err := error(nil); err != nil {",
		"a created journal's directory is durable when Create returns"},
	{"journal: skip the sync of the preallocated file", "internal/journal/writer.go", "func (w *Writer) preallocate(", "if err := f.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"a created journal reads as an empty log after a crash"},
	{"journal: skip the directory sync after creating the file", "internal/journal/writer.go", "func (w *Writer) preallocate(", "return w.fsys.SyncDir(filepath.Join(w.root, Dir))", "return nil",
		"a created journal's file is durable under its name when Create returns"},
	{"journal: skip the commit group's fdatasync", "internal/journal/writer.go", "func (w *Writer) lead(", "err = w.f.Sync()", "err = error(nil)",
		"a committed record is durable when Commit returns"},
	{"journal: skip the sync of a checkpoint's files", "internal/journal/writer.go", "func (w *Writer) syncPath(", "err = f.Sync()", "err = error(nil)",
		"a checkpoint frees only records whose files are durable"},
	{"journal: skip the sync of a checkpoint's header", "internal/journal/writer.go", "func (w *Writer) checkpoint(", "err = w.f.Sync()", "err = error(nil)",
		"the ring reuses no space a replay from the durable header needs"},
	{"journal: skip the sync of a replayed file", "internal/journal/reader.go", "func (l *Log) Apply(", "if err := files[p].Sync(); err != nil {", "if err := func(any) error { return nil }(files[p]); err != nil {",
		"a replayed file holds the journal's records durably when Apply returns"},
	{"journal: skip the directory sync of Remove", "internal/journal/reader.go", "func (c *Claim) Remove(", "return c.fsys.SyncDir(filepath.Join(c.root, Dir))", "return nil",
		"a removed journal, whose records may be stale, does not come back after a crash"},
	{"journal: checkpoint groups whose applies have not returned", "internal/journal/writer.go", "func (w *Writer) checkpoint(",
		"w.groups[k].applying.Load() == 0", "w.groups[k].applying.Load() >= 0",
		"a checkpoint frees only records whose files it synced after they were written there"},

	// The index lines an open session holds (internal/index: File).
	{"index: write the held lines again after a rewrite", "internal/index/file.go", "func (x *File) Reset(",
		"x.held, x.heldLines, x.heldBytes = x.held[:0], 0, 0 // es has their lines", "_ = 0 // es has their lines",
		"index.jsonl names each record once, in log order"},
	{"index: leave the held lines unwritten at Close", "internal/index/file.go", "func (x *File) Close(",
		"errors.Join(x.Flush(), x.f.Close())", "x.f.Close()",
		"a closed session's index.jsonl has a line for every event of its plain chunks"},
	// The syncs of an encrypted session's key record (encrypt.go).
	{"skip the root's sync after making the keys directory", "encrypt.go", "func (s *Store) writeKeyRecord(", "return s.opts.fs.SyncDir(s.dir)", "return nil",
		"an encrypted session always has its key record"},
	{"skip the session directory's sync after moving the key record in", "encrypt.go", "func (s *Store) moveKeyIntoSession(", "the destination's.\n\treturn s.opts.fs.SyncDir(dir)", "the destination's.\n\treturn nil",
		"a session deleted to the trash keeps its key"},
	{"skip the keys directory's sync after moving the key record back", "encrypt.go", "func (s *Store) moveKeyOutOfSession(", "return s.opts.fs.SyncDir(filepath.Dir(to))", "return nil",
		"an undeleted session's key record is back in keys/"},
	{"store an encrypted session's records in clear", "append.go", "func (s *Store) pendingOf(", "rec: key.sealRecord(rec), key: key,", "rec: rec, key: key,",
		"no record of an encrypted session is stored in clear"},
	{"leave a deleted session's key record in keys/", "delete.go", "func (s *Store) deleteSession(", "kerr = s.moveKeyIntoSession(id)", "kerr = nil",
		"a session's key goes to the trash with it and is destroyed with it"},
	{"open a fork's prefix under the fork's key", "fork.go", "func (s *Store) readRun(", "holder = pre.segs[seg].session", "holder = h.id",
		"a fork of an encrypted session reads its parent's records"},
	{"replace the key record of a session another Create is making", "encrypt.go", "func (s *Store) writeKeyRecord(", "if _, err := s.opts.fs.Stat(s.sessionDir(id)); err == nil {", "if false {",
		"a Create of an id never replaces the key of the session of that id"},
	{"write an encrypted session's previews in clear", "append.go", "func (h *openSession) writeBatch(", "pv = k.sealPreview(hdrs[i].ID, pv)", "_ = k",
		"an encrypted session's previews are sealed"},
	{"open a sealed preview moved to another event", "encrypt.go", "func previewAAD(", "binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])", "0, 0",
		"a sealed preview opens only as its own event's"},
	{"show a fork's prefix previews as a plain session's", "fork.go", "func (s *Store) segPreviews(", "v := previewsOf(s.recordKey(ctx, seg.session))", "v := previewsOf(nil, nil)",
		"a fork of an encrypted session shows its parent's previews"},
	{"leave the previews under the old data key after a re-encryption", "reencrypt.go", "func (r *resealer) chunk(", "ne.Preview = r.resealPreview(e.ID, e.Preview)", "_ = r.resealPreview",
		"a re-encrypted session's previews open under the new key"},
	{"leave an encrypted session's entries rebuilt from chunk lines without previews", "tree.go", "func (s *Store) ownPreviews(", "h.fillPreviews(key, es)", "_ = es",
		"an encrypted session's entries rebuilt from chunk lines get their previews again"},
	{"keep a fork's prefix read before its parent's Reencrypt", "fork.go", "func (s *Store) prefixNodes(", "stale = stale || v.stale(pre.segs[k].path)", "stale = stale || false && v.stale(pre.segs[k].path)",
		"a fork shows its prefix's previews after its parent's Reencrypt"},
	{"take a CR inside a sealed preview's base64", "internal/eventline/preview.go", "func (p *lineParser) sealedPreviewValue(", "\t\tif !(c >= 'A'", "\t\tif false && !(c >= 'A'",
		"an index line is read only in the layout AppendIndex writes"},
	{"replace a key object unconditionally in a remote Rewrap", "encrypt_remote.go", "func (s *Store) rewrapKeyObject(", "err = rp.ReplaceIf(ctx, key, nb, tag)", "err = s.opts.Remote.Put(ctx, key, nb)\n\t\t_ = tag",
		"a remote Rewrap never brings back a key object a Delete destroyed"},
	{"leave a fork prefix's lost previews empty", "fork.go", "func (s *Store) segPreviews(", "s.fillPrefix(pre, seg, v.key)", "_ = pre",
		"a fork of an encrypted parent shows the previews its prefix's entries lost"},
	{"keep the old data key after a re-encryption", "reencrypt.go", "func (r *resealer) finish(", "r.rec.Keys = r.rec.Keys[len(r.rec.Keys)-1:]", "r.rec.Keys = r.rec.Keys[0:]",
		"a re-encrypted session's key record holds the new data key only"},
	{"leave a blob's record under the old data key", "reencrypt.go", "func (r *resealer) chunk(", "\t\t\tif changed {\n", "\t\t\tif changed && false {\n",
		"every record of a re-encrypted session is sealed under the new key, blobs too"},
	{"leave the blobs of the old envelopes after a re-encryption", "reencrypt.go", "func (s *Store) Reencrypt(", "if _, err := s.GC(ctx, session); err != nil {", "if err := error(nil); err != nil {",
		"no blob sealed under the old data key stays"},
	{"destroy a remote session's key object after its delete marker", "delete.go", "func (s *Store) deleteSession(", "return s.destroyKeyObject(ctx, id)\n", "return nil\n",
		"with Options.Remote, a delete destroys the key first"},
	{"leave the older versions of a destroyed key object", "encrypt_remote.go", "func (s *Store) destroyKeyObject(", "if vd, is := s.opts.Remote.(ObjectVersionDeleter); is {", "if vd, is := s.opts.Remote.(ObjectVersionDeleter); is && false {",
		"no version of a deleted session's key object stays"},
	{"seal a Create under its own key beside the key object another left", "encrypt_remote.go", "func (s *Store) claimKeyObject(", "\tif bytes.Equal(got, b) {", "\tif bytes.Equal(got, got) {",
		"a Create adopts the key object of the id it finds"},
	{"keep a read-only session's index across a re-encryption", "readonly.go", "func (h *openSession) refresh(", "if ks := h.keyRecordStamp(); ks != h.keyStamp {", "if ks := h.keyRecordStamp(); false && ks != h.keyStamp {",
		"a reader of a re-encrypted session reads the blobs its lines name now"},
	{"resolve an event read before a re-encryption by its old digest only", "blob.go", "func (s *Store) Resolve(", "if cerr != nil || cur.Digest == ev.Digest", "if true || cerr != nil || cur.Digest == ev.Digest",
		"an event held from before a Reencrypt still resolves"},
	{"keep a remote session's key record on the local disk", "session.go", "func (s *Store) makeSessionDir(", "if key != nil && s.opts.Remote == nil {", "if key != nil {",
		"no root keeps a copy of a remote session's key that a Delete elsewhere would leave"},
	{"adopt the key object of a session that exists", "encrypt_remote.go", "func (s *Store) claimRemoteKey(", "\tcase err == nil:\n", "\tcase false:\n",
		"a Create of an existing id is ErrExists and touches no key object"},
	{"trust a cached key whatever its key record says", "encrypt.go", "func (s *Store) recordKeyWith(", "c.stamp == stamp {", "true {",
		"a session deleted and made again by another Store is read and written under its new key"},
	{"skip the sync after destroying a key record", "encrypt.go", "func shredKeyFile(", "return s.opts.fs.SyncDir(filepath.Dir(path))", "return nil",
		"a purged session's key is gone for good"},
	// Durable deltas (internal/deltalog, stream_durable.go).
	{"no durable entry for a new stream directory", "internal/deltalog/writer.go", "func Open(", "if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {", "if err := error(nil); err != nil {",
		"synced deltas survive a power loss"},
	{"no durable entry for a new segment", "internal/deltalog/writer.go", "func (w *Writer) create(", "if err := w.fsys.SyncDir(w.dir); err != nil {", "if err := error(nil); err != nil {",
		"synced deltas survive a power loss"},
	{"no background sync of deltas", "internal/deltalog/writer.go", "func (w *Writer) syncNow(", "_ = w.Sync()", "_ = error(nil)",
		"deltas are durable within DeltaSyncInterval"},
	{"delta sync skipped", "internal/deltalog/writer.go", "func (w *Writer) syncLocked(", "if err := f.Sync(); err != nil {", "if err := error(nil); err != nil {",
		"synced deltas survive a power loss"},
	{"superseded deltas presented as partial output", "stream_durable.go", "func (s *Store) PartialOutput(", "if uuid.UUID(st.marker) != newest || len(st.pending) == 0 {", "if len(st.pending) == 0 {",
		"durable deltas are never presented once an event settled them"},
	// Search.
	{"a posting's term frequency written as one", "internal/search/segment.go", "func (x *Index) encodeSegment(", "if t.ps[k+1] == 1 {", "if true {",
		"the index answers as a scan of the records"},
	{"use a kept frame whatever the file holds now", "internal/zchunk/cache.go", "func (c *Cache) get(", "if !bytes.Equal(e.comp, comp) {", "if false && !bytes.Equal(e.comp, comp) {",
		"a cached frame never hides a replaced or damaged file"},
	{"use a kept file whatever its path's status now", "internal/zchunk/files.go", "func (c *Cache) take(", "if k.id != id {", "if false && k.id != id {",
		"a chunk file kept open never hides a replaced, damaged or removed file"},
	{"serve a kept file's frame whatever file it was read from", "internal/zchunk/cache.go", "func (c *Cache) getKept(", "if e == nil || e.id != id {", "if e == nil {",
		"a frame kept from a file replaced at its path is not served for the new one"},
	{"keep a file whose status just changed", "internal/zchunk/files.go", "func (c *Cache) keep(", "if c.files.closed || now.Sub(time.Unix(0, id.ctime)) < c.files.racy {", "if c.files.closed {",
		"a write within the file system clock's tick is not hidden by a kept file"},
	{"keep a deleted session's chunks open", "delete.go", "func (s *Store) deleteSession(", "s.opts.frames.CloseFiles(false)", "_ = 0",
		"a Delete frees its files' space"},
	{"keep chunks open past Close", "store.go", "func (s *Store) Close(", "s.opts.frames.CloseFiles(true)", "_ = 0",
		"Close closes every file"},
	{"answer a search from the last listing whatever the catalogue's version", "searchindex.go", "func (s *Store) listForSearch(", "if ok && si.listing != nil && v == si.listedAt {", "if si.listing != nil {",
		"a Search sees the sessions created, changed and deleted since the last"},
	{"a phrase's earlier words not compared", "internal/search/text.go", "func FindFirst(", "if ring[(n-k+j)%span] != t.Tokens[j] {", "if ring[(n-k+j)%span] != t.Tokens[j] && false {",
		"a hit holds the query's phrases, word for word"},
	{"an encrypted session's words written to disk", "internal/search/files.go", "func (x *Index) Save(", "return !s.Private && !s.Dead", "return !s.Dead",
		"no plaintext of an encrypted session in the search index"},
	// Usage totals.
	{"token sums wrap around", "usage.go", "func satAdd(", "if s := a + b; s >= a {", "if s := a + b; true || s >= a {",
		"usage totals saturate, never turn negative"},
	{"a usage member the store cannot have written is trusted", "usage.go", "func (u *RecordedUsage) valid(", "u.Events == 0 && len(u.Models) > 0:", "false:",
		"usage totals are a function of the log"},
}

// mutationCatchers names, for each mutation, a test that caught it when
// the list was last run (the first to fail): TestMutations runs it alone
// first, and the whole package only when it passes, so a mutation costs
// one test's time instead of the package's. A name missing here, or a
// test that no longer catches its mutation, costs only time: the whole
// package then decides.
var mutationCatchers = map[string]string{
	"use a kept frame whatever the file holds now":                                      "TestCacheFileChanged",
	"use a kept file whatever its path's status now":                                    "TestFilesKept",
	"serve a kept file's frame whatever file it was read from":                          "TestFilesKeptFrames",
	"keep a file whose status just changed":                                             "TestFilesRacy",
	"keep a deleted session's chunks open":                                              "TestDeleteClosesKeptChunks",
	"keep chunks open past Close":                                                       "TestDeleteClosesKeptChunks",
	"answer a search from the last listing whatever the catalogue's version":            "TestSearchListingFollowsChanges",
	"a phrase's earlier words not compared":                                             "TestFindFirstAgainstDoc",
	"destroy a remote session's key object after its delete marker":                     "TestRemoteEncryptedDelete",
	"leave the older versions of a destroyed key object":                                "TestRemoteEncryptedDelete",
	"seal a Create under its own key beside the key object another left":                "TestRemoteEncryptedCreateAdoptsKey",
	"keep a read-only session's index across a re-encryption":                           "TestReviewReencReadOnlyReaderAfter",
	"resolve an event read before a re-encryption by its old digest only":               "TestReviewReencResolveHeldEvent",
	"keep a remote session's key record on the local disk":                              "TestRemoteEncrypted",
	"adopt the key object of a session that exists":                                     "TestReviewReencRemoteCreateExistingWrongError",
	"an encrypted session's words written to disk":                                      "TestSearchDeleteReadOnlyEncrypted",
	"no durable entry for a new stream directory":                                       "TestStreamCrashPoints",
	"no durable entry for a new segment":                                                "TestStreamCrashPoints",
	"no background sync of deltas":                                                      "TestDeltaBackgroundSync",
	"delta sync skipped":                                                                "TestStreamCrashPoints",
	"superseded deltas presented as partial output":                                     "TestPartialOutputSupersededByEventWithoutMarker",
	"a posting's term frequency written as one":                                         "TestSegmentRoundTrip",
	"token sums wrap around":                                                            "TestReviewUsageOverflowSaturates",
	"a usage member the store cannot have written is trusted":                           "TestReviewUsageHostileMeta",
	"Reencrypt checks the workspace marker only before the lock":                        "TestWorkspaceReencryptBesideSnapshot",
	"accept an application record in the store's reserved form":                         "TestReviewWorkspaceMalformedReservedRecord",
	"GC reads no workspace manifest":                                                    "TestWorkspaceGCKeepsContents",
	"record a racy file's time":                                                         "TestWorkspaceRacyWriteSeenLater",
	"write a restored file without confinement":                                         "TestWorkspaceHostile",
	"keep the files a delta removes":                                                    "TestWorkspaceSnapshotRestore",
	"skip the sync of a restored file":                                                  "TestWorkspaceRestoreCrash",
	"skip the directory syncs of a Restore":                                             "TestWorkspaceRestoreCrash",
	"skip the sync of the parent of a directory Restore made":                           "TestWorkspaceRestoreCrash",
	"skip the root's sync after making the keys directory":                              "TestEncryptedCreateCrashPoints",
	"skip the session directory's sync after moving the key record in":                  "TestEncryptedKeySyncs",
	"skip the keys directory's sync after moving the key record back":                   "TestEncryptedKeySyncs",
	"store an encrypted session's records in clear":                                     "TestEncryptedNoPlaintextOnDisk",
	"write an encrypted session's previews in clear":                                    "TestEncryptedNoPlaintextOnDisk",
	"open a sealed preview moved to another event":                                      "TestEncryptedPreviews",
	"show a fork's prefix previews as a plain session's":                                "TestEncryptedPreviews",
	"leave the previews under the old data key after a re-encryption":                   "TestReencrypt",
	"leave an encrypted session's entries rebuilt from chunk lines without previews":    "TestReviewPrevReadOnlyTail",
	"keep a fork's prefix read before its parent's Reencrypt":                           "TestReviewPrevForkPrefixAfterParentReencrypt",
	"take a CR inside a sealed preview's base64":                                        "TestReviewPrevSealedPreviewNotCanonical",
	"replace a key object unconditionally in a remote Rewrap":                           "TestRemoteRewrapBesideDelete",
	"leave a fork prefix's lost previews empty":                                         "TestReviewRwForkOfRecoveredParentPreviews",
	"keep the old data key after a re-encryption":                                       "TestReencrypt",
	"leave a blob's record under the old data key":                                      "TestReencrypt",
	"leave the blobs of the old envelopes after a re-encryption":                        "TestReencrypt",
	"leave a deleted session's key record in keys/":                                     "TestEncryptedDeleteIsFinal",
	"open a fork's prefix under the fork's key":                                         "TestEncryptedFork",
	"replace the key record of a session another Create is making":                      "TestReviewEncCreateOfIDBeingCreatedReplacesKey",
	"trust a cached key whatever its key record says":                                   "TestEncryptedKeyCacheAcrossStores",
	"skip the sync after destroying a key record":                                       "TestEncryptedKeySyncs",
	"skip the local sync of a commit group acknowledged after it":                       "TestDurableLocalPowerLoss",
	"fork at an event acknowledged after the local sync without waiting for its Create": "TestReviewAckLocalForkAtUnstoredEvent",
	"leave a failed Create's acknowledged events to the session's next call":            "TestReviewAckLocalHealthyStoreLosesTail",
	"take a full listing page for all the ids below the cursor":                         "TestListPageRemoteListsItsPage",
	"cut the unstored tail of a lease that acknowledged after the local sync":           "TestDurableLocalStoresTheTailOnReopen",
	"start a chunk or a sealing with acknowledged groups not stored":                    "TestDurableLocalFaultAtEveryCall",
	"keep the unstored tail without storing it":                                         "TestDurableLocalStoresTheTailOnReopen",
	"record no Local in a lease's markers":                                              "TestDurableLocalStoresTheTailOnReopen",
	"skip the lease renewal of an idle holder":                                          "TestRemoteIdleHolderRenewsItsLease",
	"ignore the newest lease's renewal":                                                 "TestHolderIdleCountsOnlyTheNewestLeasesRenewal",
	"renew a lease another Store took over":                                             "TestRemoteIdleHolderRenewsItsLease",
	"acknowledge a data object before the ones before it are stored":                    "TestPutDataInOrder",
	"fill no free number before a taking marker":                                        "TestRemoteTakeoverWithCreatesInFlight",
	"fill no number after a taking marker":                                              "TestRemoteTakeoverWithCreatesInFlight",
	"skip another lease's void in a view":                                               "TestReadViewWindow",
	"skip a marker found by a fill after a taking marker":                               "TestFillLocked",
	"skip another lease's object past the numbers the marker's Store filled":            "TestReadViewWindow",
	"record only the lease's own window in its markers":                                 "TestMarkerCarriesWindow",
	"publish a group before the groups written before it":                               "TestCommitPending",
	"journaled writes reserve a preallocation step":                                     "TestChunkReserve",
	"seal a full chunk while the appends go on":                                         "TestSealingWaitsForAPause",
	"delete dead data objects instead of replacing them by tombstones":                  "TestRemoteStalledTaker",
	"skip log objects missing after the newest marker":                                  "TestReadViewTombstones",
	"take a gap in the log's listing for a whole log":                                   "TestRemoteMissingObjectIsDamage",
	"a missing data object the log's state names is a remote failure":                   "TestRemoteMissingObjectIsDamage",
	"let full chunks wait for a pause without bound":                                    "TestSealingWaitsForAPause",
	"AwaitSealing waits for a pause in the appends":                                     "TestSealingWaitsForAPause",
	"skip the local sync of a remote session's commit group":                            "TestRemoteCloseThenPowerLoss",
	"list a session being written from the catalogue":                                   "TestEachCurrent",
	"list from the catalogue whatever the sessions directory's stamp":                   "TestBackwards",
	"list from a catalogue log with an ignored tail":                                    "TestTailNotCurrent",
	"skip the index file's fdatasync":                                                   "TestFlush",
	"keep writing after the held index lines are lost":                                  "TestLazyEndAppendingIndexWriteFails",
	"skip the active chunk's sync when it closes":                                       "TestLazyEndAppendingThenCrash",
	"skip the active chunk's sync at a checkpoint":                                      "TestConcurrencyStress",
	"skip the chunk's sync after cutting journaled bytes back":                          "TestBlobGC",
	"a hole after a bad line starts the invalid tail":                                   "TestWalk",
	"skip the fdatasync of appends":                                                     "TestChunkSyncDurable",
	"skip the fdatasync of appends where the engine calls it":                           "TestBlobGC",
	"skip the commit group's fdatasync":                                                 "TestAcknowledgedIsSynced",
	"acknowledge before the fdatasync ends":                                             "TestAcknowledgedIsSynced",
	"skip the chunk's sync when settling journaled records":                             "TestSettle",
	"skip the sync of the JOURNAL marker":                                               "TestWriteMarkerDurable",
	"skip the root's name sync when writing its configuration":                          "TestOpenMakesFoundRootDurable",
	"skip the directory sync of a new JOURNAL marker":                                   "TestWriteMarkerDurable",
	"skip the sync of a full chunk's journaled records":                                 "TestJournalSettleThenCrash",
	"skip the chunk's sync before forgetting a session's records":                       "TestUpdatedAtAfterCrashInFlushOrClose",
	"forget a session's records without replaying a dead journal":                       "TestTakeOverAppliesDeadJournal",
	"skip the directory sync after creating a chunk":                                    "TestChunkSyncDurable",
	"skip the blob file's sync":                                                         "TestPutDurable",
	"skip the blob directories' syncs":                                                  "TestPutDurable",
	"skip the sealed chunk's sync":                                                      "TestGroupCommit",
	"skip the directory sync after the sealed chunk's rename":                           "TestUpgradeCrashPoints",
	"remove the plain chunk before sealing it":                                          "TestSealChunk",
	"rewrite the index in place after sealing":                                          "TestIndexRewriteFailsDuringSync",
	"skip the temporary file's sync in a replace":                                       "TestBlobGC",
	"skip the directory sync after a replace":                                           "TestReplaceFileCrashPoints",
	"rename before the temporary file is synced":                                        "TestLostTailWithFreeSpaceCrashSafe",
	"write session.json in place":                                                       "TestPutReplacesWhole",
	"write HEAD in place":                                                               "TestMaterializeAfterFailedRepairByAnotherCall",
	"skip the sessions directory sync of Create":                                        "TestCreateCrashPoints",
	"serve a caller with a run that began before it":                                    "TestCoalescerLaterCallersGetALaterRun",
	"skip syncing a new root":                                                           "TestOpenMakesSessionsDirDurable",
	"skip syncing a new root's parent":                                                  "TestOpenBesideAnotherOpenMakingTheRoot",
	"skip the sync of a catalogue pending record":                                       "TestCatalogueCrashPoints",
	"take the catalogue log as the last batch left it without looking":                  "TestCatalogueXproc",
	"fold a snapshot of another generation":                                             "TestFold",
	"copy snapshot lines without checking their frame":                                  "TestFold",
	"trust a catalogue entry with a pending record":                                     "TestRebuild",
	"trust a catalogue entry whatever session.json's stamp":                             "TestCatalogueDisagrees",
	"answer ListRecent whatever the sessions directory's stamp":                         "TestCatalogueDisagrees",
	"accept a catalogue log of another generation":                                      "TestCatalogueDisagrees",
	"skip the index sync of Flush":                                                      "TestFlush",
	"skip the directory sync after GC's removals":                                       "TestSweep",
	"collect the blobs kept-aside bytes name":                                           "TestGCKeepsBlobsOfKeptAsideRecords",
	"skip syncing records found after the last index line":                              "TestReconcileSyncsUnindexedRecords",
	"skip the directory sync after finishing an interrupted HEAD replace":               "TestRepairsSurviveASecondPowerCut",
	"keep no cut bytes aside":                                                           "TestGCKeepsBlobsOfKeptAsideRecords",
	"skip the sync of a kept-aside file's bytes":                                        "TestLostTailRepairCrashSafe",
	"skip the directory sync of a kept-aside file":                                      "TestLostTailRepairCrashSafe",
	"make directories without syncing their names":                                      "TestSyncFetchedBlobNamed",
	"skip the directory sync after moving a bad HEAD aside":                             "TestSyncBadHEADKeptAsideDurably",
	"skip the fdatasync of syncFile":                                                    "TestReconcileSyncsUnindexedRecords",
	"skip the sync after cutting a torn tail":                                           "TestRepairsSurviveASecondPowerCut",
	"cut no torn tail":                                                         "TestGCKeepsBlobsOfKeptAsideRecords",
	"skip the sync of the index rewrite":                                       "TestLostTailWithFreeSpaceCrashSafe",
	"cut the index in place in a repair":                                       "TestRepairReportsEachRepairOnce",
	"skip the directory sync of a removal":                                     "TestFlush",
	"take any damaged end of the log for a lost tail":                          "TestLazyLoadParentLocationOverflow",
	"skip the checksum of lines":                                               "TestGCKeepsBlobsOfKeptAsideRecords",
	"skip the digest check of blobs":                                           "TestReadDamage",
	"skip the whole record's check of a split blob":                            "TestSplitTableLies",
	"report a session's lock held at the first try":                            "TestLockGrace",
	"report a parent deleted during Fork's read as its missing file":           "TestForkParentDeletedWhileRead",
	"skip the string table's checksum":                                         "TestSplitDamage",
	"let GC remove the strings of split blobs it keeps":                        "TestSweepKeepsStrings",
	"split records in a format 2 session":                                      "TestFormat2Fixture",
	"store every string apart":                                                 "TestStrings",
	"acknowledge before the object store has the commit group":                 "TestRemoteDeleteFencesZombie",
	"skip the sync of a restored chunk":                                        "TestSyncRestoredSessionSurvivesCrash",
	"skip the chunks directory sync after creating a restored chunk":           "TestSyncFetchedBlobNamed",
	"skip the sync of a downloaded sealed chunk":                               "TestDownloadSealed",
	"skip the directory sync after a downloaded sealed chunk's rename":         "TestDownloadSealed",
	"vouch for no sealed chunk file":                                           "TestRemoteReopenTrustsVouchedSealedChunks",
	"vouch for sealed chunk files whatever the log's seals":                    "TestRemoteVouchingIsBounded",
	"vouch for sealed chunk files beyond the release's":                        "TestRemoteVouchingIsBounded",
	"download a path's chunks one at a time":                                   "TestPrefetchDownloadsSideBySide",
	"a taker trusts its marker without checking it is the newest":              "TestRemoteStalledTakerAfterCompaction",
	"a takeover keeps no numbers of the holder it took over":                   "TestRemoteCompactionBoundsHandoffs",
	"compaction deletes the data objects the state names":                      "TestRemoteCompactionBoundsHandoffs",
	"compaction never comes back for an object that died later":                "TestRemoteStalledTakerAfterCompaction",
	"a reader takes objects deleted under it for an earlier build's deletions": "TestReviewStaleReaderSkipsCompactedMarker",
	"a reader's full listing puts objects it never read in its view":           "TestReviewFullListingSkipsNewObjects",
	"compaction runs despite RemoteKeepLog":                                    "TestRemoteKeepLog",
	"report a blob a concurrent read completed as missing":                     "TestRemoteSplitBlobStringFetchedMeanwhile",
	"GC reads a kept blob's strings from the local file":                       "TestRemoteGCKeepsTheObjectsStrings",
	"a Fork reads the parent before its delete intent":                         "TestReviewForkReadsIntentAfterDeleteRemovedIt",
	"GC removes under a lease idle for half of it":                             "TestRemoteGCFenced",
	"a remote page skips a session whose copy was replaced":                    "TestReviewListPageRemoteSkipsUpdatedSession",
	"a Fork reads no delete intent":                                            "TestRemoteDeleteBeforeForkAcrossRoots",
	"a Delete looks for no fork made on another root":                          "TestRemoteForkBetweenDeleteChecksAcrossRoots",
	"a Delete commits with a stale intent":                                     "TestRemoteDeleteIntentExpires",
	"end the subscriptions while Close holds its lock":                         "TestCloseDuringReplay",
	"a follower's look drops the deferred downloads":                           "TestFollowerLoadBesideALook",
	"a remote page reads every session's metadata":                             "TestListPageRemoteReadsItsPage",
	"collect objects younger than the lease":                                   "TestRemoteGC",
	"collect the strings of the split blobs kept":                              "TestRemoteGC",
	"collect sealed chunks a seal record names":                                "TestRemoteGC",
	"collect without checking the session is still held":                       "TestRemoteGCFenced",
	"a dry run of GC removes objects":                                          "TestRemoteGC",
	"a follower looks at the log only when it opens a session":                 "TestFollowerSeesAppends",
	"a follower reads the log from its newest marker at every look":            "TestFollowerPaysForWhatIsNew",
	"an extended view forgets the payloads of objects not applied yet":         "TestExtendView",
	"a follower delivers the same events again":                                "TestFollowerSubscribe",
	"a stream from an offset replays the offset's event too":                   "TestSubscribeFromErrors",
	"take an existing log object for this writer's":                            "TestLogWriterFenced",
	"skip the subdirectories' sync of Create":                                  "TestForkCrashPoints",
	"change lanes without waiting for the appends in flight":                   "TestSwitchLaneBesideAppendInFlight",
	"write lanes.json in place":                                                "TestPutReplacesWhole",
	"take a caller's id stored with another record as a retry":                 "TestAppendCallerID",
	"a retry does not wait for its original in flight":                         "TestAppendWithStored",
	"skip the sessions directory sync after a Delete's move":                   "TestDeleteFaults",
	"skip the root's sync after creating the trash":                            "TestSyncDeleteCrashLeavesFilesReachable",
	"skip the trash's sync after a Delete's move":                              "TestSyncDeleteMoveSyncsBothDirectories",
	"skip the trash's sync after a Delete's removals":                          "TestSyncDeleteLeavesNothing",
	"skip the directory syncs of a removal of a tree":                          "TestSyncDeleteLeavesNothing",
	"skip the trash's sync after emptying it":                                  "TestSyncDeleteCrashLeavesFilesReachable",
	"skip the sessions directory sync after an Undelete's rename":              "TestUndeleteSyncsBothDirectories",
	"skip the trash's sync after an Undelete's rename":                         "TestUndeleteSyncsBothDirectories",
	"skip the trash's sync after renaming entries for removal":                 "TestPurgeCrashPoints",
	"remove trash entries before their purge time":                             "TestTrashExpiry",
	"keep trash entries past their purge time":                                 "TestTrashExpiry",
	"undelete a fork whose parent is gone":                                     "TestUndeleteFork",
	"undelete onto a session created again":                                    "TestUndeleteCreatedAgain",
	"prune pinned sessions":                                                    "TestPrunePinned",
	"trash a session without applying a dead writer's journal":                 "TestReviewTrashJournalRecordsSurviveTrash",
	"take every marked session for a fork":                                     "TestReviewTrashForkIDCreatedAgain",
	"undelete an entry without session.json":                                   "TestUndeleteSkipsWhatIsNoSession",
	"leave a directory a crashed Create left in Undelete's way":                "TestReviewTrashUndeleteOverUnfinishedCreate",
	"prune recently used sessions":                                             "TestPruneKeepRecent",
	"open a session whose log ends with a delete marker":                       "TestRemoteDeleteSeenByEveryStore",
	"keep no preview in index lines":                                           "TestGoldenFiles",
	"no preview for an entry rebuilt from its chunk line":                      "TestOldIndexWithoutPreviews",
	"read a moved batch at its old place":                                      "TestSeqUpgradeInsideLoop",
	"journal: skip the root's sync after making the journal directory":         "TestSyncCreateThenCrash",
	"journal: skip the sync of the preallocated file":                          "TestSyncCreateThenCrash",
	"journal: skip the directory sync after creating the file":                 "TestSyncCreateThenCrash",
	"journal: skip the commit group's fdatasync":                               "TestSyncCreateThenCrash",
	"journal: checkpoint groups whose applies have not returned":               "TestCrashAtEveryOperation",
	"index: write the held lines again after a rewrite":                        "TestIndexFileHoldsLines",
	"index: leave the held lines unwritten at Close":                           "TestIndexLinesWrittenInBatches",
	"journal: skip the sync of a checkpoint's files":                           "TestCrashAtEveryOperation",
	"journal: skip the sync of a checkpoint's header":                          "TestCrashAtEveryOperation",
	"journal: skip the sync of a replayed file":                                "TestSyncReplayThenCrash",
	"journal: skip the directory sync of Remove":                               "TestSyncReplayThenCrash",
}

// TestMutations applies each mutation in turn to a copy of the module and
// runs the tests of the mutated file's packages against it (at their
// default sizes, without the race detector; see mutationPackages): each
// must make some test fail. It also runs the copy unchanged first, the
// tests of every package a selected mutation targets, which must pass, so
// that a failure means the mutation was caught. It runs only when
// SESSIONSTORE_MUTATE is set (.ci/run sets it); it takes about 20 seconds
// per mutation of the root package on 2 cores, two at a time.
func TestMutations(t *testing.T) {
	sel := os.Getenv(mutateEnv)
	if sel == "" {
		t.Skipf("set %s=1 (or a regular expression of mutation names) to run the mutation check", mutateEnv)
	}
	match := regexp.MustCompile(".")
	if sel != "1" {
		match = regexp.MustCompile(sel)
	}
	src, err := os.Getwd()
	require.NoError(t, err)
	// Two copies of the module, each mutated and tested in turn by a
	// worker of its own: a package's tests run mostly on one core (they
	// wait for fsyncs), so two at once take about half the time on the
	// two cores CI has.
	const workers = 2
	dsts := make([]string, workers)
	for i := range dsts {
		dsts[i] = t.TempDir()
		require.NoError(t, copyModule(src, dsts[i]))
	}

	// A build cache of the check's own, removed with it: each mutated
	// copy of the root package adds about 30 MB of compiled packages that
	// no later build uses, about 7 GB for the whole check, which the
	// shared cache would keep for days (go trims entries unused for five)
	// and a machine running CI several times a day fills its disk with.
	// The unchanged copy's run below compiles the standard library and
	// the dependencies into it once (about 45 s more on 2 cores).
	t.Setenv("GOCACHE", t.TempDir())

	rootImports, err := packageImports(".")
	require.NoError(t, err)
	// The unchanged copy runs every catcher in one go test (below): it
	// gets more time than one mutation's run, which stops at its first
	// failing test.
	timeout := "-timeout=400s"
	run := func(dst, what, pattern string, pkgs []string) (bool, string, time.Duration) {
		start := time.Now()
		// A mutation that makes a test hang (waiting for a sync that never
		// comes, say) is caught by the test binary's -timeout.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		// -failfast: a mutation is caught by its first failing test; the
		// rest of the package's tests would add minutes, not information.
		// (go test runs the packages side by side, each to its own end or
		// first failure.)
		// -vet=off: the tree's vet runs once in .ci/run; vetting each
		// mutated copy again costs seconds per mutation and finds nothing
		// about the tests.
		// -ldflags=-w: no DWARF tables; linking the root package's test
		// binary without them takes about half a second less.
		// -gcflags=-l: no inlining in the packages named (the mutated
		// one's), which cuts compiling the root package's test binary, the
		// bulk of each run, from about 9.9 to 7.6 s on this machine (3.4 s
		// of CPU less, about 220 s of the check); the code's meaning is the
		// same, only slower calls.
		args := []string{"test", "-count=1", "-failfast", "-vet=off", "-ldflags=-w", "-gcflags=-l", timeout, "-skip=^TestMutations"}
		if pattern != "" {
			args = append(args, "-run="+pattern)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
		cmd.Dir = dst
		// GOGC=400: the compiler collects its heap a quarter as often;
		// compiling the root package's test binary took 7.5-9.1 s instead
		// of 9.5-11.4 s (2026-12-07, 2 cores, 0.7 GB at most instead of
		// 0.5), about a fifth of the check. The tests run with it too:
		// none depends on when a collection happens (those that measure
		// the heap call runtime.GC first).
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, mutateEnv+"=") || strings.HasPrefix(kv, "SESSIONSTORE_") || strings.HasPrefix(kv, "GOGC=")
		}), "GOGC=400")
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			return false, fmt.Sprintf("%s: go test did not finish in time:\n%s", what, out), time.Since(start)
		}
		return err == nil, string(out), time.Since(start)
	}

	var todo []int
	var all []string // the packages the selected mutations target
	for i, m := range mutations {
		if match.MatchString(m.name) {
			todo = append(todo, i)
			for _, p := range mutationPackages(m.file, rootImports) {
				if !slices.Contains(all, p) {
					all = append(all, p)
				}
			}
		}
	}
	if len(all) == 0 {
		all = []string{"."}
	}

	// The unchanged copy first, alone, so that a failure means the
	// mutation was caught: the catchers of the selected mutations when
	// each names one (a mutation whose catcher fails is caught without
	// the rest of its packages' tests), else every test of the packages.
	// (A mutation its catcher misses runs the rest of the packages' tests
	// unchecked here; .ci/run runs every test of the tree unmutated
	// before this, and fails first if one fails.)
	pattern := ""
	var catchers []string
	for _, i := range todo {
		c := mutationCatchers[mutations[i].name]
		if c == "" {
			catchers = nil
			break
		}
		if !slices.Contains(catchers, c) {
			catchers = append(catchers, c)
		}
	}
	if len(catchers) > 0 {
		pattern = "^(" + strings.Join(catchers, "|") + ")$"
	}
	ok, out, took := run(dsts[0], "the unchanged copy", pattern, all)
	require.True(t, ok, "the unchanged copy must pass its tests:\n%s", out)
	t.Logf("unchanged copy: tests %q of %s pass (%v)", pattern, strings.Join(all, " "), took.Round(time.Second))
	timeout = "-timeout=150s" // each mutation's run, from here on (before the workers start)

	type result struct {
		logs, errs []string
		caught     bool
	}
	results := make([]result, len(todo))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range jobs {
				m := mutations[todo[j]]
				results[j] = mutate(dsts[w], m, mutationPackages(m.file, rootImports), run)
			}
		})
	}
	for j := range todo {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	caught, tried := 0, len(todo)
	for _, r := range results {
		for _, l := range r.logs {
			t.Log(l)
		}
		for _, e := range r.errs {
			t.Error(e)
		}
		if r.caught {
			caught++
		}
	}
	t.Logf("mutation score: %d of %d caught", caught, tried)
	assert.Equal(t, tried, caught, "every mutation must be caught")
}

// mutate applies m to the module copy dst, runs the tests of pkgs with
// run and restores the file: the mutation is caught when a test fails.
func mutate(dst string, m mutation, pkgs []string, run func(dst, what, pattern string, pkgs []string) (bool, string, time.Duration)) (r struct {
	logs, errs []string
	caught     bool
}) {
	failing := regexp.MustCompile(`(?m)^--- FAIL: (\S+)`)
	path := filepath.Join(dst, filepath.FromSlash(m.file))
	orig, err := os.ReadFile(path)
	if err != nil {
		r.errs = append(r.errs, err.Error())
		return r
	}
	mutated, err := m.apply(orig)
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("mutation %q no longer applies: update it with the code: %v", m.name, err))
		return r
	}
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		r.errs = append(r.errs, err.Error())
		return r
	}
	defer os.WriteFile(path, orig, 0o644)
	// go build, not go vet: vet type-checks and analyzes the package again
	// (11 s for the root package, against 2.5 s to build it, whose result
	// go test then reuses for the packages that import it). Not for the
	// root package: only its own tests are run for a root mutation
	// (mutationPackages), and they compile it again with them, so its
	// build would be 2.5 s lost per mutation; a root mutation that does
	// not compile is reported by go test below ("does not compile with
	// the tests").
	if dir := filepath.Dir(m.file); dir != "." {
		build := exec.Command("go", "build", "./"+filepath.ToSlash(dir))
		build.Dir = dst
		if out, err := build.CombinedOutput(); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("mutation %q does not compile:\n%s", m.name, out))
			return r
		}
	}
	// The test known to catch the mutation first, alone; the whole
	// packages when it does not (the tests changed): caught means some
	// test failed either way.
	ok, out, took := true, "", time.Duration(0)
	if test := mutationCatchers[m.name]; test != "" {
		// Only the package that defines it: building the root package's
		// tests besides, for a test of an internal package, would double
		// the mutation's time.
		ok, out, took = run(dst, m.name, "^"+test+"$", testPackages(dst, test, pkgs))
	}
	if ok {
		var more time.Duration
		ok, out, more = run(dst, m.name, "", pkgs)
		took += more
	}
	if !ok && (strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]")) {
		// go build above compiles the package, not its tests: a mutation
		// that breaks only the tests' build is not a caught one.
		r.errs = append(r.errs, fmt.Sprintf("mutation %q does not compile with the tests:\n%s", m.name, out))
		return r
	}
	if ok {
		r.errs = append(r.errs, fmt.Sprintf("MUTATION SURVIVED: %q (%s:%s): no test noticed that it breaks %q", m.name, m.file, m.in, m.promise))
		return r
	}
	var by []string
	for _, f := range failing.FindAllStringSubmatch(out, -1) {
		if !strings.Contains(f[1], "/") {
			by = append(by, f[1])
		}
	}
	if i := strings.Index(out, "panic: test timed out"); i >= 0 {
		// A hang: name the tests that were running.
		hung := out[i:]
		if j := strings.Index(hung, "\n\ngoroutine "); j >= 0 {
			hung = hung[:j]
		}
		by = append(by, "a hang ("+strings.Join(strings.Fields(hung), " ")+")")
	}
	if len(by) == 0 {
		by = []string{"(no test failed: " + firstLine(out) + ")"}
	}
	r.caught = true
	r.logs = append(r.logs, fmt.Sprintf("caught %q in %v by %s", m.name, took.Round(time.Second), strings.Join(by, ", ")))
	return r
}

// testPackages returns those of pkgs (go test arguments, relative to the
// module copy dst) whose test files define the test function name: the
// first package that does, or all of pkgs when none does.
func testPackages(dst, name string, pkgs []string) []string {
	for _, pkg := range pkgs {
		files, _ := filepath.Glob(filepath.Join(dst, filepath.FromSlash(pkg), "*_test.go"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && strings.Contains(string(b), "\nfunc "+name+"(") {
				return []string{pkg}
			}
		}
	}
	return pkgs
}

// mutationPackages returns the packages (as go test arguments) whose tests
// check a mutation of file (slash-separated, relative to the module root):
// the file's own package, and the root package too when the file is in a
// package the root package imports (rootImports), whose tests exercise it
// through the store. The root package's tests are run for a root file.
func mutationPackages(file string, rootImports map[string]bool) []string {
	dir := path.Dir(file)
	if dir == "." {
		return []string{"."}
	}
	pkgs := []string{"./" + dir}
	if rootImports[modulePath+"/"+dir] {
		pkgs = append(pkgs, ".")
	}
	return pkgs
}

// modulePath is the module's path (go.mod).
const modulePath = "github.com/sessionstore/sessionstore"

// packageImports returns the import paths of the package in dir (its
// files that are not tests).
func packageImports(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	imports := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return nil, err
			}
			imports[p] = true
		}
	}
	return imports, nil
}

// firstLine returns the first line of s that is not blank.
func firstLine(s string) string {
	for l := range strings.Lines(s) {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// apply returns src with the mutation made, or an error if its function
// or its text is not there exactly once.
func (m mutation) apply(src []byte) ([]byte, error) {
	start := bytes.Index(src, []byte("\n"+m.in))
	if start < 0 || bytes.Count(src, []byte("\n"+m.in)) != 1 {
		return nil, fmt.Errorf("%s: no one function starting %q", m.file, m.in)
	}
	start++
	end := bytes.Index(src[start:], []byte("\n}\n"))
	if end < 0 {
		return nil, fmt.Errorf("%s: no end of %q", m.file, m.in)
	}
	end += start
	body := src[start:end]
	if n := bytes.Count(body, []byte(m.old)); n != 1 {
		return nil, fmt.Errorf("%s: %q occurs %d times in %q, not once", m.file, m.old, n, m.in)
	}
	out := slices.Concat(src[:start], bytes.Replace(body, []byte(m.old), []byte(m.new), 1), src[end:])
	return out, nil
}

// TestMutationsApply: every mutation still applies to the code as it is,
// and changes it (a mutation that no longer applies would be skipped in
// silence by nothing, but fail the mutation check late: this fails early).
func TestMutationsApply(t *testing.T) {
	names := map[string]bool{}
	for _, m := range mutations {
		assert.False(t, names[m.name], "duplicate mutation name %q", m.name)
		names[m.name] = true
		src, err := os.ReadFile(filepath.FromSlash(m.file))
		require.NoError(t, err)
		out, err := m.apply(src)
		if assert.NoError(t, err, m.name) {
			assert.NotEqual(t, string(src), string(out), m.name)
		}
	}
}

// copyModule copies the files the package's tests need (go.mod, go.sum,
// the package's files, internal/ and testdata/) from src to dst.
func copyModule(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		if d.IsDir() {
			if rel != "." && !strings.Contains(rel, string(filepath.Separator)) && top != "internal" && top != "testdata" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if rel == top && top != "go.mod" && top != "go.sum" && !strings.HasSuffix(rel, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// TestMutationCatchers: every name in mutationCatchers is a mutation's,
// and every test it names is a test of a package the mutation's check
// runs (mutationPackages), so that a renamed mutation or test does not
// quietly send the check back to the whole packages for each run.
func TestMutationCatchers(t *testing.T) {
	rootImports, err := packageImports(".")
	require.NoError(t, err)
	byName := map[string]mutation{}
	for _, m := range mutations {
		byName[m.name] = m
	}
	srcs := map[string]string{} // a package's test files, concatenated
	tests := func(pkg string) string {
		if s, ok := srcs[pkg]; ok {
			return s
		}
		files, err := filepath.Glob(filepath.Join(filepath.FromSlash(pkg), "*_test.go"))
		require.NoError(t, err)
		var src strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			src.Write(b)
		}
		srcs[pkg] = src.String()
		return srcs[pkg]
	}
	for name, test := range mutationCatchers {
		m, ok := byName[name]
		if !assert.True(t, ok, "mutationCatchers names %q, which is no mutation", name) {
			continue
		}
		pkgs := mutationPackages(m.file, rootImports)
		found := slices.ContainsFunc(pkgs, func(pkg string) bool {
			return strings.Contains(tests(pkg), "\nfunc "+test+"(t *testing.T) {")
		})
		assert.True(t, found, "mutationCatchers[%q] names %s, which is no test of %s", name, test, strings.Join(pkgs, " "))
	}
}
