package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// journalCrash appends n events to each of k sessions through one
// Store's journal and returns the store's file system as a power loss
// then leaves it (only synced bytes kept: the chunks' journaled bytes
// lost), with the events acknowledged per session.
func journalCrash(t *testing.T, k, n int, mode vfs.CrashMode) (*vfs.MemFS, []uuid.UUID, map[uuid.UUID][]Event) {
	t.Helper()
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	acked := map[uuid.UUID][]Event{}
	var ids []uuid.UUID
	for range k {
		meta, err := s.Create(ctx, Meta{Name: "j"})
		require.NoError(t, err)
		ids = append(ids, meta.ID)
	}
	for i := range n {
		for _, id := range ids {
			ev, err := s.Append(ctx, id, UserText(strings.Repeat("x", i%5*40)))
			require.NoError(t, err)
			acked[id] = append(acked[id], ev)
		}
	}
	require.NotEmpty(t, journalFiles(t, m), "the appends went through the journal")
	crashed := m.CrashClone(mode, 7)
	require.NoError(t, s.Close())
	return crashed, ids, acked
}

// journalFiles lists the journal directory of memRoot on m.
func journalFiles(t *testing.T, m vfs.FS) []string {
	t.Helper()
	names, err := m.ReadDir(filepath.Join(memRoot, journal.Dir))
	if err != nil {
		return nil
	}
	return names
}

func assertEvents(t *testing.T, s *Store, id uuid.UUID, want []Event, what string) {
	t.Helper()
	got, err := s.Load(context.Background(), id)
	require.NoError(t, err, what)
	require.Len(t, got, len(want), what)
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID, "%s: event %d", what, i)
	}
	head, err := s.Head(context.Background(), id)
	require.NoError(t, err, what)
	assert.Equal(t, want[len(want)-1].ID, head, what)
}

// TestJournalAcknowledgedAfterPowerLoss: events acknowledged through the
// journal are there after a power loss that kept none of the chunks'
// unsynced bytes, for a read-only Store (laid over the chunks) and for a
// writer (replayed into them); the writer's Open removes the dead journal
// and clears each session's JOURNAL.
func TestJournalAcknowledgedAfterPowerLoss(t *testing.T) {
	for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepRandom, vfs.KeepZeroedTail} {
		crashed, ids, acked := journalCrash(t, 4, 30, mode)
		for _, id := range ids {
			owner, err := journal.ReadMarker(crashed, filepath.Join(memRoot, sessionsDir, id.String()))
			require.NoError(t, err)
			require.NotEmpty(t, owner, "JOURNAL names the journal")
		}

		ro := openMem(t, crashed, Options{ReadOnly: true})
		for _, id := range ids {
			assertEvents(t, ro, id, acked[id], "read-only")
		}
		require.NoError(t, ro.Close())

		w := openMem(t, crashed, Options{})
		for _, id := range ids {
			assertEvents(t, w, id, acked[id], "writer")
			owner, err := journal.ReadMarker(crashed, filepath.Join(memRoot, sessionsDir, id.String()))
			require.NoError(t, err)
			assert.Empty(t, owner, "JOURNAL names none once replayed")
		}
		assert.Equal(t, 1, w.opts.dead.Reads(), "the dead journal is read once for all its sessions")
		for _, id := range ids {
			ev, err := w.Append(context.Background(), id, UserText("after"))
			require.NoError(t, err)
			acked[id] = append(acked[id], ev)
		}
		mine := w.opts.jr.current()
		require.NotEmpty(t, mine)
		assert.ElementsMatch(t, []string{mine + ".wal", mine + ".lock"}, journalFiles(t, crashed),
			"the first commit recovered and removed the dead journal")
		require.NoError(t, w.Close())
		again := openMem(t, crashed.CrashClone(vfs.KeepSynced, 1), Options{})
		for _, id := range ids {
			assertEvents(t, again, id, acked[id], "after a second crash")
		}
		require.NoError(t, again.Close())
	}
}

// TestJournalTakeOverBesideDeadJournal: a session opened by another
// writer while the dead journal is still there (a Store opened before the
// owner died) is replayed from it when opened.
func TestJournalTakeOverBesideDeadJournal(t *testing.T) {
	crashed, ids, acked := journalCrash(t, 2, 10, vfs.KeepSynced)
	// A Store whose Open found nothing to replay: the journal appears
	// after it opened (its owner was alive then).
	o := Options{fs: crashed}
	o2, err := o.withDefaults()
	require.NoError(t, err)
	o2.fs = storeFS(o2.fs, memRoot)
	o2.jr = newStoreJournal(memRoot, &o2)
	s := newStore(memRoot, o2)
	require.NotEmpty(t, journalFiles(t, crashed))
	assertEvents(t, s, ids[0], acked[ids[0]], "taken over")
	owner, err := journal.ReadMarker(crashed, filepath.Join(memRoot, sessionsDir, ids[0].String()))
	require.NoError(t, err)
	assert.Empty(t, owner)
	// The first commit recovers the dead journal: the other session,
	// never opened, has its records in its chunks (no journal is left
	// for a reader to lay over them).
	_, err = s.Append(context.Background(), ids[0], UserText("next"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Empty(t, journalFiles(t, crashed))
	ro := openMem(t, crashed, Options{ReadOnly: true})
	assertEvents(t, ro, ids[1], acked[ids[1]], "the other session, recovered")
	require.NoError(t, ro.Close())
}

// TestJournalCloseForgets: a clean Close leaves no journal and no
// JOURNAL file; a crash after it needs no replay.
func TestJournalCloseForgets(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	evs := appendN(t, s, meta.ID, 20)
	require.NoError(t, s.CloseSession(ctx, meta.ID))
	_, err = m.Stat(filepath.Join(memRoot, sessionsDir, meta.ID.String(), markerName))
	assert.Error(t, err, "JOURNAL removed at the session's close")
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	assert.Empty(t, journalFiles(t, m))
	s = openMem(t, crashed, Options{JournalSize: -1})
	assertEvents(t, s, meta.ID, evs, "closed session after a crash, no replay")
	require.NoError(t, s.Close())
}

// TestJournalMarkerDamaged: a JOURNAL file whose content names no
// journal (what a crash can leave of a marker being written) is read as
// "any journal": every dead journal's records for the session are
// applied before it is written, and the marker is rewritten. A reader
// sees it as naming none.
func TestJournalMarkerDamaged(t *testing.T) {
	ctx := context.Background()
	crashed, ids, acked := journalCrash(t, 1, 8, vfs.KeepSynced)
	id := ids[0]
	path := filepath.Join(memRoot, sessionsDir, id.String(), markerName)
	_, err := journal.ReadMarker(crashed, filepath.Dir(path))
	require.NoError(t, err, "precondition")
	writeMemFile(t, crashed, path, []byte("not an owner id at all, no no no\n"))
	_, err = journal.ReadMarker(crashed, filepath.Dir(path))
	var ce *journal.CorruptionError
	require.ErrorAs(t, err, &ce, "precondition: the marker reads as damaged")
	assert.Equal(t, path, ce.Path)
	s := openMem(t, crashed, Options{})
	assertEvents(t, s, id, acked[id], "taken over from any dead journal")
	ev, err := s.Append(ctx, id, UserText("x"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openMem(t, crashed.CrashClone(vfs.KeepSynced, 2), Options{})
	assertEvents(t, s, id, append(acked[id], ev), "after another crash")
	require.NoError(t, s.Close())
}

// TestJournalApplyFailure: when writing a group into its chunk fails
// after the journal made it durable, the append fails and the session
// goes on from its last event; neither the journal nor the chunk brings
// the failed event back after a power loss.
func TestJournalApplyFailure(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	first := appendN(t, s, id, 2) // the chunk has grown: the next writes fill its free space
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasSuffix(path, chunkExt) {
			return errInjected
		}
		return nil
	})
	// A batch whose first line is longer than the next append's: a
	// replay of it would leave its second line after that append's.
	_, err := s.AppendBatch(ctx, id, UserText(strings.Repeat("lost ", 60)), UserText("lost too"))
	require.ErrorIs(t, err, errInjected)
	assert.ErrorIs(t, err, journal.ErrApply)
	m.SetFault(nil)
	after, err := s.Append(ctx, id, UserText("a"))
	require.NoError(t, err, "the session goes on")
	assert.Equal(t, first[1].ID, after.ParentID)
	want := append(first, after)
	assertEvents(t, s, id, want, "live")
	for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll, vfs.KeepRandom} {
		c := openMem(t, m.CrashClone(mode, 3), Options{})
		assertEvents(t, c, id, want, "after a crash")
		require.NoError(t, c.Close())
	}
	require.NoError(t, s.Close())
}

// TestJournalSyncFailure: a failed sync of the journal stops the
// sessions whose groups it carried (ErrSessionFailed), and a power loss
// then shows each failed append absent or whole, never anything after.
func TestJournalSyncFailure(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	first := appendN(t, s, id, 3)
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, ".wal") {
			return errInjected
		}
		return nil
	})
	_, err := s.Append(ctx, id, UserText("unknown"))
	require.ErrorIs(t, err, errInjected)
	m.SetFault(nil)
	_, err = s.Append(ctx, id, UserText("refused"))
	assert.ErrorIs(t, err, ErrSessionFailed)
	for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll} {
		c := openMem(t, m.CrashClone(mode, 5), Options{})
		got, err := c.Load(ctx, id)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(got), len(first))
		assert.LessOrEqual(t, len(got), len(first)+1)
		for i := range first {
			assert.Equal(t, first[i].ID, got[i].ID)
		}
		require.NoError(t, c.Close())
	}
	s.Close()
}

var errInjected = errors.New("injected")

// TestJournalSettleThenCrash: chunks filled through the journal are
// durable once the session closed (synced when full, when settled for a
// new chunk, and at the close): after a power loss that keeps only synced
// bytes, and with the journal's records forgotten, every acknowledged
// event is there. Concurrent appenders make new chunks start while
// records are in flight (settle).
func TestJournalSettleThenCrash(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 2048, Compression: CompressionNone})
	var mu sync.Mutex
	var acked []uuid.UUID
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				ev, err := s.Append(ctx, id, UserText(fmt.Sprintf("writer %d append %d %s", w, i, strings.Repeat("y", i%4*50))))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				acked = append(acked, ev.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.CloseSession(ctx, id))
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	c := openMem(t, crashed, Options{JournalSize: -1, Compression: CompressionNone})
	defer c.Close()
	got, err := c.Load(ctx, id)
	require.NoError(t, err)
	have := map[uuid.UUID]bool{}
	for _, ev := range got {
		have[ev.ID] = true
	}
	for _, a := range acked {
		assert.True(t, have[a], "acknowledged event %s lost", a)
	}
	chunks, err := crashed.ReadDir(filepath.Join(memRoot, sessionsDir, id.String(), chunksDir))
	require.NoError(t, err)
	require.Greater(t, len(chunks), 3, "precondition: new chunks started")
}

// TestJournalOneSessionAlone: a Store holding one session open at a time
// makes no journal, and its session syncs its own chunk; once a second
// session is open the journal is wanted, made (in the background, or
// here at the next commit, which waits for it) and the commits go
// through it; all of them are there after a power loss that keeps only
// synced bytes.
func TestJournalOneSessionAlone(t *testing.T) {
	journalAlways = false
	defer func() { journalAlways = true }()
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	first, err := s.Create(ctx, Meta{Name: "first"})
	require.NoError(t, err)
	var acked []Event
	for range 3 {
		ev, err := s.Append(ctx, first.ID, UserText("alone"))
		require.NoError(t, err)
		acked = append(acked, ev)
	}
	assert.Empty(t, journalFiles(t, m), "one session open: no journal")
	assert.Empty(t, s.opts.jr.current())

	_, err = s.Create(ctx, Meta{Name: "second"})
	require.NoError(t, err)
	for range 2 {
		ev, err := s.Append(ctx, first.ID, UserText("two open"))
		require.NoError(t, err)
		acked = append(acked, ev)
	}
	w := s.opts.jr.writerIfAny()
	require.NotNil(t, w, "two sessions open: the journal is made")
	assert.Contains(t, journalFiles(t, m), w.Owner()+".wal")
	assert.Equal(t, int64(2), w.Stats().Records, "the commits went through it")

	crashed := m.CrashClone(vfs.KeepSynced, 1)
	require.NoError(t, s.Close())
	r := openMem(t, crashed, Options{})
	defer r.Close()
	assertEvents(t, r, first.ID, acked, "after a power loss")
}

// TestJournalPrepared: once a second session opens, the journal is made
// in the background, before any commit needs it.
func TestJournalPrepared(t *testing.T) {
	prepareJournal = true
	defer func() { prepareJournal = false }()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	assert.Empty(t, journalFiles(t, m), "an Open makes none")
	_, err := s.Create(context.Background(), Meta{})
	require.NoError(t, err)
	assert.Empty(t, journalFiles(t, m), "nor a first session")
	_, err = s.Create(context.Background(), Meta{})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for s.opts.jr.current() == "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.NotEmpty(t, s.opts.jr.current(), "made in the background")
	assert.Contains(t, journalFiles(t, m), s.opts.jr.current()+".wal")
}

// TestJournalLargeGroupBypasses: a commit group of journalMaxGroup bytes
// or more is written into its chunk and synced there, not through the
// journal, and is as durable: it is there after a power loss that keeps
// only synced bytes.
func TestJournalLargeGroupBypasses(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{BlobThreshold: 1 << 20})
	meta, err := s.Create(ctx, Meta{Name: "large"})
	require.NoError(t, err)
	small, err := s.Append(ctx, meta.ID, UserText("small"))
	require.NoError(t, err)
	w := s.opts.jr.writerIfAny()
	require.NotNil(t, w, "the small append went through the journal")
	before := w.Stats().Records
	require.Positive(t, before)
	large, err := s.Append(ctx, meta.ID, UserText(strings.Repeat("x", journalMaxGroup)))
	require.NoError(t, err)
	assert.Equal(t, before, w.Stats().Records, "the large group did not go through the journal")
	after, err := s.Append(ctx, meta.ID, UserText("small again"))
	require.NoError(t, err)
	assert.Equal(t, before+1, w.Stats().Records, "a small one does again")

	crashed := m.CrashClone(vfs.KeepSynced, 1)
	require.NoError(t, s.Close())
	r := openMem(t, crashed, Options{})
	defer r.Close()
	assertEvents(t, r, meta.ID, []Event{small, large, after}, "after a power loss")
}

// TestJournalBytesWhileAppending: what a Store appending to many sessions
// keeps on disk beyond their data in each session's active chunk: less
// than 4 KiB of zeros after the data (a journaled write's sync is the
// journal's: the chunk needs no free space ahead). Everything is there
// after a power loss.
func TestJournalBytesWhileAppending(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{JournalSize: DefaultJournalSize})
	var ids []uuid.UUID
	acked := map[uuid.UUID][]Event{}
	for range 5 {
		meta, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		ids = append(ids, meta.ID)
	}
	for i := range 200 {
		id := ids[i%len(ids)]
		ev, err := s.Append(ctx, id, UserText(strings.Repeat("y", 300)))
		require.NoError(t, err)
		acked[id] = append(acked[id], ev)
	}
	w := s.opts.jr.writerIfAny()
	require.NotNil(t, w)
	require.Equal(t, int64(200), w.Stats().Records, "precondition: the appends went through the journal")
	for _, id := range ids {
		dir := filepath.Join(memRoot, sessionsDir, id.String(), chunksDir)
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, names, 1, "precondition: one chunk, the active one")
		b, err := vfs.ReadFile(m, filepath.Join(dir, names[0]))
		require.NoError(t, err)
		data := len(bytes.TrimRight(b, "\x00"))
		require.Positive(t, data)
		assert.Less(t, len(b)-data, 4<<10, "%s: free space after %d bytes of data", names[0], data)
	}

	crashed := m.CrashClone(vfs.KeepSynced, 1)
	require.NoError(t, s.Close())
	r := openMem(t, crashed, Options{})
	defer r.Close()
	for _, id := range ids {
		assertEvents(t, r, id, acked[id], "after a power loss")
	}
}
