package chunkwriter

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
)

// fakeFiles records the calls a Writer makes, in order, into ops; its
// chunks keep their bytes in memory.
type fakeFiles struct {
	ops      []string
	data     map[uint32][]byte
	sealed   map[uint32][]eventline.Entry
	syncErr  error // returned by the next Sync
	closeErr error // returned by the next Close
	sealErr  error // returned by every SealChunk
}

func newFakeFiles() *fakeFiles {
	return &fakeFiles{data: map[uint32][]byte{}, sealed: map[uint32][]eventline.Entry{}}
}

func (f *fakeFiles) CreateChunk(n uint32) (Chunk, error) {
	f.ops = append(f.ops, fmt.Sprintf("create %d", n))
	f.data[n] = nil
	return &fakeChunk{f: f, n: n}, nil
}

func (f *fakeFiles) OpenChunk(n uint32, size int64) (Chunk, error) {
	f.ops = append(f.ops, fmt.Sprintf("open %d at %d", n, size))
	return &fakeChunk{f: f, n: n}, nil
}

func (f *fakeFiles) SealChunk(n uint32, es []eventline.Entry) error {
	f.ops = append(f.ops, fmt.Sprintf("seal %d", n))
	if f.sealErr != nil {
		return f.sealErr
	}
	f.sealed[n] = es
	return nil
}

type fakeChunk struct {
	f *fakeFiles
	n uint32
}

func (c *fakeChunk) WriteAt(data []byte, off int64) error {
	c.f.ops = append(c.f.ops, fmt.Sprintf("write %d at %d", len(data), off))
	b := c.f.data[c.n]
	c.f.data[c.n] = append(b[:off], data...)
	return nil
}

func (c *fakeChunk) Sync() error {
	c.f.ops = append(c.f.ops, fmt.Sprintf("sync %d", c.n))
	err := c.f.syncErr
	c.f.syncErr = nil
	return err
}

func (c *fakeChunk) Trim(size int64) {
	c.f.ops = append(c.f.ops, fmt.Sprintf("trim %d at %d", c.n, size))
}

func (c *fakeChunk) Close() error {
	c.f.ops = append(c.f.ops, fmt.Sprintf("close %d", c.n))
	err := c.f.closeErr
	c.f.closeErr = nil
	return err
}

// testWriter is a Writer on f with chunks of at most maxSize bytes; its
// Embed returns an entry per line enqueued (entries), and resealed counts
// the calls of Resealed.
type testWriter struct {
	Writer
	mu       sync.Mutex
	entries  []eventline.Entry
	resealed int
	logs     bytes.Buffer
}

// writerWithALine returns a writer whose chunk 0 holds one line, marked
// unsynced (written through the journal) if unsynced, and its files with
// no operation recorded yet.
func writerWithALine(t *testing.T, unsynced bool) (*fakeFiles, *testWriter) {
	t.Helper()
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	require.NoError(t, w.Rotate())
	w.add(t, "aaaa\n")
	if unsynced {
		w.MarkUnsynced()
	}
	f.ops = nil
	return f, w
}

func newTestWriter(f *fakeFiles, maxSize int64, compress bool) *testWriter {
	t := &testWriter{}
	t.Writer = New(Config{Files: f, Dir: "chunks", MaxSize: maxSize, Compress: compress,
		Log: slog.New(slog.NewTextHandler(&t.logs, nil)), Mu: &t.mu,
		Embed: func(n uint32) []eventline.Entry {
			var out []eventline.Entry
			for _, e := range t.entries {
				if e.Loc.Chunk == n {
					out = append(out, e)
				}
			}
			return out
		},
		Resealed: func() { t.resealed++ }})
	return t
}

// add enqueues line, rotating first when it does not fit, and writes
// and syncs the queue as a commit group does.
func (t *testWriter) add(tb testing.TB, line string) eventline.Location {
	tb.Helper()
	if t.Full(len(line)) {
		require.NoError(tb, t.Rotate())
	}
	loc := t.Enqueue([]byte(line))
	t.entries = append(t.entries, eventline.Entry{Loc: loc})
	q, off := t.TakeQueue()
	require.NoError(tb, t.WriteAt(q, off))
	require.NoError(tb, t.Active().Sync())
	t.GiveBack(q)
	return loc
}

func TestEnqueueLocations(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NoError(t, w.Rotate())
	assert.Equal(t, eventline.Location{Chunk: 0, Offset: 0}, w.NextAt())
	a := w.Enqueue([]byte("aaaa\n"))
	b := w.Enqueue([]byte("bb\n"))
	assert.Equal(t, eventline.Location{Chunk: 0, Offset: 0, Length: 5}, a)
	assert.Equal(t, eventline.Location{Chunk: 0, Offset: 5, Length: 3}, b)
	assert.True(t, w.Queued())
	assert.Equal(t, int64(8), w.Size())
	q, off := w.TakeQueue()
	assert.Equal(t, "aaaa\nbb\n", string(q))
	assert.Equal(t, int64(0), off)
	assert.False(t, w.Queued(), "taking the queue empties it")
	w.Enqueue([]byte("c\n"))
	q2, off2 := w.TakeQueue()
	assert.Equal(t, "c\n", string(q2))
	assert.Equal(t, int64(8), off2, "the next queue starts where the last one ended")
}

func TestCutBackAndDropQueue(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	require.NoError(t, w.Rotate())
	w.Enqueue([]byte("aaaa\n"))
	_, off := w.TakeQueue()
	w.Enqueue([]byte("bb\n")) // queued while the failed write ran
	w.CutBack(off)
	assert.False(t, w.Queued())
	assert.Equal(t, eventline.Location{Chunk: 0, Offset: 0}, w.NextAt(), "the next record goes where the failed write began")

	w.Enqueue([]byte("cc\n"))
	w.DropQueue()
	assert.False(t, w.Queued())
	assert.Equal(t, int64(3), w.Size(), "dropping the queue keeps the end of the data")
}

func TestFull(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 10, false)
	assert.True(t, w.Full(1), "no active chunk")
	require.NoError(t, w.Rotate())
	for _, tc := range []struct {
		size int64
		n    int
		full bool
	}{
		{0, 100, false}, // an empty chunk takes any line
		{4, 6, false},
		{4, 7, true},
		{10, 1, true},
	} {
		w.size = tc.size
		assert.Equal(t, tc.full, w.Full(tc.n), "size %d, line %d", tc.size, tc.n)
	}
}

// TestRotate: the full chunk's journaled bytes are synced before it is
// trimmed and closed, and the next chunk is created after.
func TestRotate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unsynced bool
		want     []string
	}{
		{"synced", false, []string{"trim 0 at 5", "close 0", "create 1"}},
		{"journaled", true, []string{"sync 0", "trim 0 at 5", "close 0", "create 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, w := writerWithALine(t, tc.unsynced)
			require.NoError(t, w.Rotate())
			assert.Equal(t, tc.want, f.ops)
			assert.Equal(t, uint32(1), w.Num())
			assert.True(t, w.Fresh())
			assert.Equal(t, eventline.Location{Chunk: 1, Offset: 0}, w.NextAt())
		})
	}
}

func TestRotateSyncFails(t *testing.T) {
	f, w := writerWithALine(t, true)
	gone := errors.New("disk gone")
	f.ops, f.syncErr = nil, gone
	err := w.Rotate()
	require.Error(t, err)
	assert.ErrorIs(t, err, durable.ErrUnsynced)
	assert.ErrorIs(t, err, gone)
	assert.Equal(t, []string{"sync 0"}, f.ops, "the full chunk is neither closed nor a new one started")
	assert.NotNil(t, w.Active())
}

func TestRotateCloseFails(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	require.NoError(t, w.Rotate())
	w.add(t, "aaaa\n")
	failed := errors.New("close failed")
	f.ops, f.closeErr = nil, failed
	err := w.Rotate()
	assert.ErrorIs(t, err, failed)
	assert.Nil(t, w.Active(), "the full chunk takes no more records")
	f.ops = nil
	require.NoError(t, w.Rotate(), "the next append retries the start")
	assert.Equal(t, []string{"create 1"}, f.ops)
}

func TestTrimKeepsFreeSpaceWhileQueued(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	require.NoError(t, w.Rotate())
	w.Enqueue([]byte("aaaa\n"))
	f.ops = nil
	w.Trim()
	assert.Empty(t, f.ops)
	q, off := w.TakeQueue()
	require.NoError(t, w.WriteAt(q, off))
	f.ops = nil
	w.Trim()
	assert.Equal(t, []string{"trim 0 at 5"}, f.ops)
}

// TestSealing: a full chunk is sealed in the background with its
// entries embedded; its lines leave index.jsonl (Resealed, Plain); a
// failed sealing keeps the chunk plain and the next rotation retries it.
func TestSealing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sealErr error
	}{
		{"sealed", nil},
		{"failed", errors.New("no space")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFiles()
			f.sealErr = tc.sealErr
			w := newTestWriter(f, 10, true)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.add(t, "aaaaaa\n")
			w.add(t, "bbbbbb\n") // rotates: chunk 0 is full
			w.AwaitSealing()
			assert.False(t, w.Sealing())
			assert.Contains(t, f.ops, "seal 0")
			assert.True(t, w.Plain(1), "the active chunk is plain")
			if tc.sealErr == nil {
				assert.Equal(t, w.entries[:1], f.sealed[0])
				assert.Equal(t, 1, w.resealed)
				assert.False(t, w.Plain(0))
				return
			}
			assert.Zero(t, w.resealed)
			assert.True(t, w.Plain(0), "a chunk whose sealing failed stays plain")
			assert.Contains(t, w.logs.String(), "chunk stays uncompressed")
			f.sealErr, f.ops = nil, nil
			w.add(t, "cccccc\n") // rotates again: both full chunks are sealed
			w.AwaitSealing()
			assert.Equal(t, 2, countOf(f.ops, "seal 0")+countOf(f.ops, "seal 1"))
			assert.False(t, w.Plain(0))
			assert.False(t, w.Plain(1))
		})
	}
}

func countOf(ops []string, op string) int {
	n := 0
	for _, o := range ops {
		if o == op {
			n++
		}
	}
	return n
}

func TestNoSealingWithoutCompression(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 10, false)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add(t, "aaaaaa\n")
	w.add(t, "bbbbbb\n")
	w.AwaitSealing()
	assert.False(t, slices.ContainsFunc(f.ops, func(o string) bool { return o == "seal 0" }))
	assert.False(t, w.Plain(0), "a full chunk of a writer that does not seal is not queued")
}

// TestCheckpointAndClose: the journaled bytes of the active chunk are
// synced by Checkpoint and before Close, once.
func TestCheckpointAndClose(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unsynced   bool
		checkpoint bool
		want       []string
	}{
		{"close synced", false, false, []string{"close 0"}},
		{"close journaled", true, false, []string{"sync 0", "close 0"}},
		{"checkpoint journaled", true, true, []string{"sync 0", "close 0"}},
		{"checkpoint synced", false, true, []string{"close 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, w := writerWithALine(t, tc.unsynced)
			if tc.checkpoint {
				require.NoError(t, w.Checkpoint())
			}
			require.NoError(t, w.Close())
			assert.Equal(t, tc.want, f.ops)
			assert.Nil(t, w.Active())
			require.NoError(t, w.Close(), "closing again does nothing")
		})
	}
}

func TestCheckpointSyncFails(t *testing.T) {
	f, w := writerWithALine(t, true)
	gone := errors.New("disk gone")
	f.syncErr = gone
	assert.ErrorIs(t, w.Checkpoint(), gone)
	f.ops = nil
	require.NoError(t, w.Checkpoint())
	assert.Equal(t, []string{"sync 0"}, f.ops, "the bytes stay unsynced after a failed sync")
}

func TestOpenActive(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	require.NoError(t, w.OpenActive(3, 42))
	assert.Equal(t, []string{"open 3 at 42"}, f.ops)
	assert.False(t, w.Fresh())
	assert.Equal(t, eventline.Location{Chunk: 3, Offset: 42}, w.NextAt())
	require.NoError(t, w.Close())
	f.ops = nil
	require.NoError(t, w.Rotate())
	assert.Equal(t, []string{"create 4"}, f.ops)

	w = newTestWriter(f, 1<<20, false)
	w.SetNext(7)
	f.ops = nil
	require.NoError(t, w.Rotate())
	assert.Equal(t, []string{"create 7"}, f.ops)
}

// TestSealActive: the active chunk is closed and sealed when its entries
// cover its data, and left open otherwise.
func TestSealActive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		covered bool
		want    []string
	}{
		{"whole", true, []string{"close 0", "seal 0"}},
		{"not whole", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFiles()
			w := newTestWriter(f, 1<<20, true)
			require.NoError(t, w.Rotate())
			w.add(t, "aaaa\n")
			w.add(t, "bbbb\n")
			if !tc.covered {
				w.entries = w.entries[1:]
			}
			f.ops = nil
			w.SealActive()
			assert.Equal(t, tc.want, f.ops)
			assert.Equal(t, tc.covered, w.Active() == nil)
			if tc.covered {
				assert.Equal(t, 1, w.resealed)
				assert.Equal(t, w.entries, f.sealed[0])
			}
		})
	}
}

func TestGiveBackReusesTheQueue(t *testing.T) {
	f := newFakeFiles()
	w := newTestWriter(f, 1<<20, false)
	require.NoError(t, w.Rotate())
	w.Enqueue([]byte("aaaa\n"))
	q, _ := w.TakeQueue()
	w.GiveBack(q)
	w.Enqueue([]byte("bb\n"))
	q2, _ := w.TakeQueue() // the queue given back is the next one's buffer
	w.Enqueue([]byte("c\n"))
	q3, _ := w.TakeQueue()
	assert.Equal(t, "c\n", string(q3))
	assert.Same(t, &q[:1][0], &q3[:1][0], "the queue reuses the buffer given back")

	big := make([]byte, 1, maxSpareQueue+1)
	w.GiveBack(big)
	w.Enqueue([]byte("d\n"))
	_, _ = w.TakeQueue()
	w.Enqueue([]byte("e\n"))
	q5, _ := w.TakeQueue()
	assert.NotSame(t, &big[0], &q5[:1][0], "a buffer beyond maxSpareQueue is not kept")
	_ = q2
}

// TestSealingWaitsForAPause: a full chunk is not sealed while the appends
// go on, however long (an idle time no test reaches); AwaitSealing seals
// it at once; SealBacklog full chunks are sealed without a pause; and a
// pause of SealIdle starts the sealing by itself.
func TestSealingWaitsForAPause(t *testing.T) {
	line := func(c byte) string { return strings.Repeat(string(c), 59) + "\n" }
	t.Run("appending", func(t *testing.T) {
		f := newFakeFiles()
		w := newTestWriter(f, 100, true)
		w.sealIdle = time.Hour
		w.mu.Lock()
		w.add(t, line('a'))
		w.add(t, line('b')) // rotates: chunk 0 is full
		require.True(t, w.Sealing())
		for range 5 {
			w.mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the sealing could take the mutex now
			w.mu.Lock()
			w.add(t, "c\n")
		}
		assert.True(t, w.Plain(0), "sealed before the appends paused")
		assert.Zero(t, w.resealed)
		// AwaitSealing in another goroutine, which takes over the held
		// mutex, so that one waiting for the hour-long pause fails the
		// test instead of hanging it.
		awaited := make(chan struct{})
		go func() { w.AwaitSealing(); close(awaited) }()
		select {
		case <-awaited:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "AwaitSealing waits for a pause in the appends")
		}
		assert.False(t, w.Plain(0), "AwaitSealing seals at once")
		assert.Equal(t, 1, w.resealed)
		w.mu.Unlock()
	})
	t.Run("backlog", func(t *testing.T) {
		f := newFakeFiles()
		w := newTestWriter(f, 100, true)
		w.sealIdle = time.Hour
		w.mu.Lock()
		for i := range SealBacklog + 1 {
			w.add(t, line('a'+byte(i))) // each but the first rotates
		}
		w.mu.Unlock()
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.resealed > 0 && !w.Sealing()
		}, 10*time.Second, time.Millisecond, "a backlog of full chunks is sealed without a pause")
		w.mu.Lock()
		for n := range uint32(SealBacklog) {
			assert.False(t, w.Plain(n), "chunk %d", n)
		}
		w.mu.Unlock()
	})
	t.Run("pause", func(t *testing.T) {
		f := newFakeFiles()
		w := newTestWriter(f, 100, true)
		w.sealIdle = 20 * time.Millisecond
		w.mu.Lock()
		w.add(t, line('a'))
		w.add(t, line('b'))
		w.mu.Unlock()
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return !w.Plain(0) && !w.Sealing()
		}, 10*time.Second, time.Millisecond, "a pause starts the sealing")
	})
}
