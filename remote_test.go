package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// remoteOpts are the options of a Store on the shared object store obj.
func remoteOpts(obj ObjectStore) *Options {
	return &Options{Remote: obj, LeaseTime: time.Minute, RemoteTimeout: 5 * time.Second}
}

func textEv(s string) Event {
	return Event{Kind: KindCustom, Record: json.RawMessage(fmt.Sprintf(`{"text":%q}`, s))}
}

func loadTexts(t *testing.T, s *Store, id uuid.UUID) []string {
	t.Helper()
	evs, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		var r struct{ Text string }
		require.NoError(t, json.Unmarshal(e.Record, &r))
		out = append(out, r.Text)
	}
	return out
}

func TestRemoteRestoreOnAnotherMachine(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{Name: "moves"})
	require.NoError(t, err)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("event %d", i))
		apiAppend(t, a, m.ID, textEv(want[i]))
	}
	head, err := a.Head(ctx, m.ID)
	require.NoError(t, err)
	require.NoError(t, a.Close())

	b, _ := apiNewStore(t, remoteOpts(obj))
	assert.Equal(t, want, loadTexts(t, b, m.ID))
	got, err := b.Head(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, head, got)
	meta, err := b.Meta(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, "moves", meta.Name)
	apiAppend(t, b, m.ID, textEv("on b"))
	assert.Equal(t, append(want, "on b"), loadTexts(t, b, m.ID))
}

func TestRemoteTakeoverFencesZombie(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{Name: "contested"})
	require.NoError(t, err)
	for i := range 3 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("a%d", i)))
	}

	b, _ := apiNewStore(t, remoteOpts(obj))
	_, err = b.Load(ctx, m.ID)
	require.ErrorIs(t, err, ErrLocked, "a's lease is fresh")

	obj.advance(2 * time.Minute) // past the lease on the object store's clock
	assert.Equal(t, []string{"a0", "a1", "a2"}, loadTexts(t, b, m.ID))
	apiAppend(t, b, m.ID, textEv("b0"))

	_, err = a.Append(ctx, m.ID, textEv("zombie"))
	require.ErrorIs(t, err, ErrFenced)
	_, err = a.Append(ctx, m.ID, textEv("zombie again"))
	require.ErrorIs(t, err, ErrLocked, "the next call opens again, and b holds the session")

	assert.Equal(t, []string{"a0", "a1", "a2", "b0"}, loadTexts(t, b, m.ID))
	require.NoError(t, b.Close())
	c, _ := apiNewStore(t, remoteOpts(obj))
	assert.Equal(t, []string{"a0", "a1", "a2", "b0"}, loadTexts(t, c, m.ID))
}

func TestRemoteHandoffBackAndForth(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	ctx := context.Background()
	obj := newMemObjects()
	dirs := []string{t.TempDir(), t.TempDir()}
	rounds := testSize(t, "SESSIONSTORE_HANDOFFS", 100, 1000)
	s, err := Open(dirs[0], remoteOpts(obj))
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{Name: "handed"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	var want []string
	for i := range rounds {
		s, err := Open(dirs[i%2], remoteOpts(obj))
		require.NoError(t, err)
		want = append(want, fmt.Sprintf("round %d", i))
		_, err = s.Append(ctx, m.ID, textEv(want[i]))
		require.NoError(t, err, "round %d", i)
		if i%50 == 0 || i == rounds-1 {
			assert.Equal(t, want, loadTexts(t, s, m.ID), "round %d", i)
		}
		require.NoError(t, s.Close())
	}
	gets, lists := obj.count("get"), obj.count("list")
	s, err = Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, want, loadTexts(t, s, m.ID))
	// One page of the log, however long, and the check of its marker (a
	// compaction in the background, when due, lists it all once more).
	n := obj.count("list") - lists
	assert.True(t, n == 2 || n == 3, "an open lists one page of the log, however long: %d", n)
	t.Logf("%d handoffs, %d GETs in all, %d for a restore into an empty directory", rounds, gets, obj.count("get")-gets)
}

func TestRemoteAppendFailureIsTypedAndSettledByTheLog(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			ctx := context.Background()
			obj := newMemObjects()
			a, _ := apiNewStore(t, remoteOpts(obj))
			m, err := a.Create(ctx, Meta{})
			require.NoError(t, err)
			apiAppend(t, a, m.ID, textEv("kept"))
			obj.mu.Lock()
			obj.fail = func(op, key string) (error, bool) {
				if op == "create" && strings.Contains(key, "/log/") {
					obj.fail = nil
					return errors.New("503 slow down"), applied
				}
				return nil, false
			}
			obj.mu.Unlock()
			_, err = a.Append(ctx, m.ID, textEv("unknown"))
			require.ErrorIs(t, err, ErrRemote)

			// The next call opens the session again from the log: the
			// failed append's event is there exactly when its object was
			// stored.
			want := []string{"kept"}
			if applied {
				want = append(want, "unknown")
			}
			assert.Equal(t, want, loadTexts(t, a, m.ID))
			apiAppend(t, a, m.ID, textEv("after"))
			require.NoError(t, a.Close())
			b, _ := apiNewStore(t, remoteOpts(obj))
			assert.Equal(t, append(want, "after"), loadTexts(t, b, m.ID))
		})
	}
}

func TestRemoteSealedChunksAndBlobs(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	opts := remoteOpts(obj)
	opts.ChunkSize = 8 << 10
	opts.LeaseTime = time.Millisecond // data objects of sealed chunks go at once
	a, _ := apiNewStore(t, opts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	var want []string
	for i := range 300 {
		s := fmt.Sprintf("event %d %s", i, strings.Repeat("x", i%7*40))
		if i%50 == 0 {
			s += strings.Repeat("blob", 5000) // over the tests' blob threshold
		}
		want = append(want, s)
		apiAppend(t, a, m.ID, textEv(s))
	}
	require.NoError(t, a.Flush(ctx, m.ID))
	require.NoError(t, a.Close())
	sealed := obj.keys(seam.SessionPrefix(m.ID) + "chunks/")
	assert.NotEmpty(t, sealed)
	assert.Len(t, obj.keys(seam.SessionPrefix(m.ID)+"blobs/"), 6)
	assert.Less(t, len(obj.untombed(m.ID)), 300/4, "data objects of sealed chunks are replaced by tombstones")

	b, bdir := apiNewStore(t, remoteOpts(obj))
	assert.Equal(t, want, loadTexts(t, b, m.ID))
	blobs := 0
	filepath.WalkDir(filepath.Join(apiSessionDir(bdir, m.ID), blobsDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			blobs++
		}
		return nil
	})
	assert.Equal(t, 6, blobs, "the restore fetched the blobs Load read")
	apiAppend(t, b, m.ID, textEv("more"))
	assert.Equal(t, append(want, "more"), loadTexts(t, b, m.ID))
}

func TestRemoteBadObjectNamesItsKey(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 5 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("e%d", i)))
	}
	// Crash: no release. The restore reads the data objects after the
	// create marker; damage one.
	keys := obj.keys(seam.LogPrefix(m.ID))
	bad := keys[3]
	obj.mu.Lock()
	o := obj.objs[bad]
	o.data[len(o.data)-3] ^= 0x20
	obj.objs[bad] = o
	obj.mu.Unlock()
	obj.advance(2 * time.Minute)

	b, _ := apiNewStore(t, remoteOpts(obj))
	_, err = b.Load(ctx, m.ID)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, bad, ce.Path)
	assert.ErrorIs(t, err, ErrCorrupt)
}

func TestRemoteListAndMeta(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	var ids []uuid.UUID
	for i := range 3 {
		m, err := a.Create(ctx, Meta{Name: fmt.Sprintf("s%d", i)})
		require.NoError(t, err)
		ids = append(ids, m.ID)
	}
	_, err := a.UpdateMeta(ctx, ids[1], func(m *Meta) { m.Name = "renamed" })
	require.NoError(t, err)

	b, _ := apiNewStore(t, remoteOpts(obj))
	list, err := b.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	assert.Equal(t, []string{"s0", "renamed", "s2"}, []string{list[0].Name, list[1].Name, list[2].Name})
	meta, err := b.Meta(ctx, ids[1])
	require.NoError(t, err)
	assert.Equal(t, "renamed", meta.Name)
	recent, err := b.ListRecent(ctx, 2)
	require.NoError(t, err)
	require.Len(t, recent, 2)
	assert.Equal(t, ids[2], recent[0].ID)
	assert.Len(t, obj.keys(metaPrefix+ids[1].String()+"/"), 1, "older copies are deleted")
}

func TestRemoteCreateExisting(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	b, _ := apiNewStore(t, remoteOpts(obj))
	_, err = b.Create(ctx, Meta{ID: m.ID})
	require.ErrorIs(t, err, ErrExists)
	_, err = b.Load(ctx, uuid.Must(uuid.NewV7()))
	require.ErrorIs(t, err, ErrNotFound)
}

func TestRemoteRestoreFetchesOnlyThePathsChunks(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	opts := remoteOpts(obj)
	opts.ChunkSize = 4 << 10
	a, _ := apiNewStore(t, opts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	var trunk []string
	for i := range 20 {
		trunk = append(trunk, fmt.Sprintf("trunk %d", i))
		apiAppend(t, a, m.ID, textEv(trunk[i]))
	}
	fork, err := a.Head(ctx, m.ID)
	require.NoError(t, err)
	for i := range 400 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("abandoned %d %s", i, strings.Repeat("y", 80))))
	}
	require.NoError(t, a.Branch(ctx, m.ID, fork))
	want := trunk
	for i := range 60 {
		want = append(want, fmt.Sprintf("active %d %s", i, strings.Repeat("z", 80)))
		apiAppend(t, a, m.ID, textEv(want[len(want)-1]))
	}
	require.NoError(t, a.Close())
	var sealedBytes int64
	for _, k := range obj.keys(seam.SessionPrefix(m.ID) + "chunks/") {
		info, err := obj.Stat(ctx, k)
		require.NoError(t, err)
		sealedBytes += info.Size
	}

	b, _ := apiNewStore(t, remoteOpts(obj))
	assert.Equal(t, want, loadTexts(t, b, m.ID))
	fetched := b.opts.fetch.fetched
	assert.Less(t, fetched, sealedBytes/3, "the abandoned branch's chunks stay remote")
	t.Logf("sealed chunks %d bytes, fetched for the active path %d", sealedBytes, fetched)
	apiAppend(t, b, m.ID, textEv("next"))
	// A call that needs the whole index downloads the rest.
	tree, err := b.Tree(ctx, m.ID)
	require.NoError(t, err)
	assert.Len(t, tree, 20+400+60+1)
}

// TestRemoteLostCreateAnswer: a Create stored whose answer was lost, and
// retried by the client, reads as ErrObjectExists; the object is the
// writer's own, so the append is acknowledged, not fenced.
func TestRemoteLostCreateAnswer(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	obj.mu.Lock()
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.Contains(key, "/log/") {
			obj.fail = nil
			return fmt.Errorf("create %s: %w", key, ErrObjectExists), true
		}
		return nil, false
	}
	obj.mu.Unlock()
	apiAppend(t, a, m.ID, textEv("stored, answer lost"))
	apiAppend(t, a, m.ID, textEv("next"))
	require.NoError(t, a.Close())
	b, _ := apiNewStore(t, remoteOpts(obj))
	assert.Equal(t, []string{"stored, answer lost", "next"}, loadTexts(t, b, m.ID))
}

func TestRemoteOptions(t *testing.T) {
	obj := newMemObjects()
	for _, o := range []Options{
		{Remote: obj, ReadOnly: true, FollowInterval: -time.Second},
		{Remote: obj, LeaseTime: -time.Second},
		{Remote: obj, RemoteTimeout: -time.Second},
		{Remote: obj, RemoteWindow: -1},
		{Remote: obj, RemoteWindow: 65},
		{Remote: obj, RemoteDurability: DurableLocal + 1},
		{Remote: obj, RemoteDurability: -1},
	} {
		_, err := Open(t.TempDir(), &o)
		assert.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	s, dir := apiNewStore(t, remoteOpts(obj))
	id1 := s.opts.storeID
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, remoteOpts(obj))
	assert.Equal(t, id1, s2.opts.storeID, "a root keeps its holder id")
	s3, _ := apiNewStore(t, remoteOpts(obj))
	assert.NotEqual(t, id1, s3.opts.storeID, "another root has another")
}

// TestRemoteRestartTakesItsOwnSessionBack: a Store on the same root
// after a crash (no release) takes the session at once, where another
// root must wait out the lease.
func TestRemoteRestartTakesItsOwnSessionBack(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dir := t.TempDir()
	a, err := Open(dir, remoteOpts(obj))
	require.NoError(t, err)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("before the crash"))
	// The process dies: its lock goes, its lease stays (a is left as it
	// is, never closed, as a dead process would leave it).
	h, _ := a.reg.tab.Get(m.ID)
	require.NotNil(t, h)
	h.mu.Lock()
	require.NoError(t, h.lock.Close())
	h.lock = nil
	h.mu.Unlock()

	other, _ := apiNewStore(t, remoteOpts(obj))
	_, err = other.Load(ctx, m.ID)
	assert.ErrorIs(t, err, ErrLocked)
	again := apiOpen(t, dir, remoteOpts(obj))
	assert.Equal(t, []string{"before the crash"}, loadTexts(t, again, m.ID))
	apiAppend(t, again, m.ID, textEv("after"))
}

func TestRemoteCloseSessionHandsOffAtOnce(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	b, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("on a"))
	_, err = b.Load(ctx, m.ID)
	require.ErrorIs(t, err, ErrLocked, "a holds it while open")
	require.NoError(t, a.CloseSession(ctx, m.ID))
	apiAppend(t, b, m.ID, textEv("on b"))
	require.NoError(t, b.CloseSession(ctx, m.ID))
	require.NoError(t, b.CloseSession(ctx, m.ID), "closing a session not open does nothing")
	assert.Equal(t, []string{"on a", "on b"}, loadTexts(t, a, m.ID), "a opens it again")
}

// TestRemoteRestoreAfterManyUnreleasedAppends: more objects than a page
// of the listing after the newest marker (a holder that died after many
// appends): the open lists the whole log and has every event.
func TestRemoteRestoreAfterManyUnreleasedAppends(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	var want []string
	for i := range 3*seam.ViewPage + 5 {
		want = append(want, fmt.Sprintf("e%d", i))
		apiAppend(t, a, m.ID, textEv(want[i]))
	}
	obj.advance(2 * time.Minute)
	b, _ := apiNewStore(t, remoteOpts(obj))
	lists := obj.count("list")
	assert.Equal(t, want, loadTexts(t, b, m.ID))
	assert.Equal(t, 3, obj.count("list")-lists, "a page, then the whole log, then the check of its marker")
	apiAppend(t, b, m.ID, textEv("b"))
	assert.ErrorIs(t, a.Close(), ErrFenced, "a's Close finds it lost the session")
}

// TestRemoteDeadObjectsDieAcrossShortHolds: data objects a sealing made
// unneeded are deleted LeaseTime after the sealing by whichever Store
// holds the session then, even when no holder keeps it that long.
func TestRemoteDeadObjectsDieAcrossShortHolds(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	opts := remoteOpts(obj)
	opts.ChunkSize = 4 << 10
	opts.LeaseTime = 300 * time.Millisecond
	dirs := []string{t.TempDir(), t.TempDir()}
	// The first hold writes with a long lease: on a loaded machine its 100
	// appends can outlast 300 ms, and the dead objects would start dying
	// before the short holds this test is about.
	long := *opts
	long.LeaseTime = time.Hour
	s, err := Open(dirs[0], &long)
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 100 {
		apiAppend(t, s, m.ID, textEv(fmt.Sprintf("event %d %s", i, strings.Repeat("d", 100))))
	}
	require.NoError(t, s.Close())
	before := len(obj.untombed(m.ID))
	require.Greater(t, before, 100, "the sealings' data objects are still there")
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(deadline) && len(obj.untombed(m.ID)) >= before/2; i++ {
		s, err := Open(dirs[i%2], opts)
		require.NoError(t, err)
		apiAppend(t, s, m.ID, textEv(fmt.Sprintf("short hold %d", i)))
		require.NoError(t, s.Close()) // held far less than LeaseTime
		time.Sleep(50 * time.Millisecond)
	}
	assert.Less(t, len(obj.untombed(m.ID)), before/2, "dead data objects were replaced by tombstones")
	c, _ := apiNewStore(t, remoteOpts(obj))
	texts := loadTexts(t, c, m.ID)
	assert.Equal(t, "event 0 "+strings.Repeat("d", 100), texts[0])
	assert.Greater(t, len(texts), 100)
}

// TestRemoteBlobFetchFailureIsRemote: a blob a restore must fetch, whose
// download fails, is an ErrRemote, not a missing (corrupt) blob; the
// next read fetches it.
func TestRemoteBlobFetchFailureIsRemote(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	big := strings.Repeat("blob", 5000)
	apiAppend(t, a, m.ID, textEv(big))
	require.NoError(t, a.Close())
	obj.mu.Lock()
	obj.fail = func(op, key string) (error, bool) {
		if op == "get" && strings.Contains(key, "/blobs/") {
			return errors.New("connection reset"), false
		}
		return nil, false
	}
	obj.mu.Unlock()
	b, _ := apiNewStore(t, remoteOpts(obj))
	_, err = b.Load(ctx, m.ID)
	require.ErrorIs(t, err, ErrRemote)
	assert.NotErrorIs(t, err, ErrCorrupt)
	obj.mu.Lock()
	obj.fail = nil
	obj.mu.Unlock()
	assert.Equal(t, []string{big}, loadTexts(t, b, m.ID))
}

// TestRemoteCloseThenPowerLoss: a clean release records that the
// directory holds the log up to its release (remote.json), and the next
// open fetches only newer objects: the directory must not lose what it
// held then, so the local chunk holds every acknowledged commit group
// durably, as a local session's does.
func TestRemoteCloseThenPowerLoss(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	m := vfs.NewMemFS()
	s := openMem(t, m, *remoteOpts(obj))
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("event %d", i))
		apiAppend(t, s, meta.ID, textEv(want[i]))
	}
	require.NoError(t, s.CloseSession(ctx, meta.ID))
	path := filepath.Join(memRoot, sessionsDir, meta.ID.String(), chunksDir, chunkName(0))
	held, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	require.NotEmpty(t, held, "precondition: the chunk holds the events")
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())

	kept, err := vfs.ReadFile(crashed, path)
	require.NoError(t, err)
	// The free space the close cut off may be back (the cut is not
	// synced): zeros, which readers skip.
	kept = kept[:len(kept)-zeroTail(kept)]
	assert.True(t, bytes.Equal(held, kept), "the directory keeps what it held at the release: %d bytes of %d", len(kept), len(held))
	c := openMem(t, crashed, *remoteOpts(obj))
	defer c.Close()
	assert.Equal(t, want, loadTexts(t, c, meta.ID))
}

// TestRemoteSplitBlobs: in the remote mode a split blob's strings go to
// the object store as objects of their own, once, before the split blob;
// a restore fetches them with the blob that names them, and fetches a
// string again when only it is missing from the local directory.
func TestRemoteSplitBlobs(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	opts := remoteOpts(obj)
	opts.StringThreshold = 1000
	a, _ := apiNewStore(t, opts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	shot := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAA", 100)
	var want []json.RawMessage
	for i := range 5 {
		ev := Event{Kind: KindCustom, Record: json.RawMessage(fmt.Sprintf(`{"text":"turn %d","image":%q}`, i, shot))}
		want = append(want, ev.Record)
		apiAppend(t, a, m.ID, ev)
	}
	require.NoError(t, a.Close())
	assert.Len(t, obj.keys(seam.SessionPrefix(m.ID)+"blobs/"), 6, "five split blobs and the image once")

	b, bdir := apiNewStore(t, opts)
	load := func() {
		t.Helper()
		evs, err := b.Load(ctx, m.ID)
		require.NoError(t, err)
		require.Len(t, evs, len(want))
		for i, ev := range evs {
			ev, err = b.Resolve(ctx, m.ID, ev)
			require.NoError(t, err)
			assert.Equal(t, string(want[i]), string(ev.Record))
		}
	}
	load()
	var files []string
	filepath.WalkDir(filepath.Join(apiSessionDir(bdir, m.ID), blobsDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	assert.Len(t, files, 6, "the restore fetched the split blobs and their string")
	// The string alone goes missing: the next read fetches it.
	strPath := blobPath(apiSessionDir(bdir, m.ID), sha256.Sum256([]byte(shot)))
	require.FileExists(t, strPath)
	require.NoError(t, b.Close())
	require.NoError(t, os.Remove(strPath))
	b = apiOpen(t, bdir, opts)
	load()
	assert.FileExists(t, strPath)
}

// staleOpenFS fails the next opens for reading of one file with
// ErrNotExist while the file is there: a read that found the file
// absent just before another read fetched it.
type staleOpenFS struct {
	vfs.FS
	mu    sync.Mutex
	path  string
	fails int
}

func (f *staleOpenFS) arm(path string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.path, f.fails = path, n
}

func (f *staleOpenFS) left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fails
}

func (f *staleOpenFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f.mu.Lock()
	stale := flag == os.O_RDONLY && name == f.path && f.fails > 0
	if stale {
		f.fails--
	}
	f.mu.Unlock()
	if stale {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return f.FS.OpenFile(name, flag, perm)
}

// TestRemoteSplitBlobStringFetchedMeanwhile: a read of a restored split
// blob that finds its string absent, when by the time it looks for what
// to fetch another read (Load reads several blobs at once) has fetched
// the string, reads again rather than reporting the string missing.
func TestRemoteSplitBlobStringFetchedMeanwhile(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	opts := remoteOpts(obj)
	opts.StringThreshold = 1000
	a, _ := apiNewStore(t, opts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	shot := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAA", 100)
	ev := apiAppend(t, a, m.ID, Event{Kind: KindCustom, Record: json.RawMessage(fmt.Sprintf(`{"image":%q}`, shot))})
	require.NotEmpty(t, ev.Digest, "the record went to a split blob")
	require.NoError(t, a.Close())

	fsys := &staleOpenFS{FS: vfs.Default}
	bopts := *opts
	bopts.fs = fsys
	b, bdir := apiNewStore(t, &bopts)
	evs, err := b.Load(ctx, m.ID) // the restore: every file fetched
	require.NoError(t, err)
	require.Len(t, evs, 1)
	strPath := blobPath(apiSessionDir(bdir, m.ID), sha256.Sum256([]byte(shot)))
	require.FileExists(t, strPath)

	fsys.arm(strPath, 1)
	evs, err = b.Load(ctx, m.ID)
	assert.Zero(t, fsys.left(), "the load's first read of the string found it absent")
	if assert.NoError(t, err, "Load") && assert.Len(t, evs, 1) {
		assert.Equal(t, string(ev.Record), string(evs[0].Record))
	}

	fsys.arm(strPath, 1)
	unresolved := ev
	unresolved.Record = nil
	got, err := b.Resolve(ctx, m.ID, unresolved)
	assert.Zero(t, fsys.left(), "the resolve's first read of the string found it absent")
	if assert.NoError(t, err, "Resolve") {
		assert.Equal(t, string(ev.Record), string(got.Record))
	}
}
