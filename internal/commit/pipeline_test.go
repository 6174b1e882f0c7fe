package commit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
)

// rec is a record of the tests' sessions: its number, and its line.
type rec struct {
	n    int
	line string
}

// lineOf is record n's line in the chunk.
func lineOf(n int) string { return fmt.Sprintf("r%03d\n", n) }

// fakeChunk is an active chunk in memory that keeps its bytes and the
// prefix of them a sync made durable. Its own mutex guards it: a leader
// writes it without the session's.
type fakeChunk struct {
	mu           sync.Mutex
	data, synced []byte
	writes       int
	syncs        int
}

func (c *fakeChunk) WriteAt(data []byte, off int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	c.data = append(c.data[:off], data...)
	return nil
}

func (c *fakeChunk) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncs++
	c.synced = slices.Clone(c.data)
	return nil
}

func (c *fakeChunk) Trim(int64)   {}
func (c *fakeChunk) Close() error { return nil }

// state returns the chunk's bytes, durable bytes, writes and syncs.
func (c *fakeChunk) state() (data, synced string, writes, syncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.data), string(c.synced), c.writes, c.syncs
}

// fakeFiles hands out the one fakeChunk.
type fakeFiles struct{ c *fakeChunk }

func (f fakeFiles) CreateChunk(uint32) (chunkwriter.Chunk, error)      { return f.c, nil }
func (f fakeFiles) OpenChunk(uint32, int64) (chunkwriter.Chunk, error) { return f.c, nil }
func (f fakeFiles) SealChunk(uint32, []eventline.Entry) error          { return nil }

// fakeLog is the session side of a test pipeline: it writes and syncs
// the chunk (or, journaled, writes it unsynced as a journal would after
// its own commit), fails where the test says, and records what the
// pipeline tells it. Its fields but writeHook are guarded by the
// session's mutex, except those Write uses (guarded by wmu).
type fakeLog struct {
	t *testing.T
	c *fakeChunk

	wmu       sync.Mutex
	writeErrs []error // for the next writes, in turn (nil: succeed)
	syncErrs  []error // for the next syncs, in turn
	journaled bool    // Write goes through a "journal": no sync of the chunk
	commits   int     // journal commits
	// writeHook, if set, is called by Write before it writes, without the
	// session's mutex: tests hold a leader there.
	writeHook func()

	stopped    error
	published  []int
	dropped    []int
	stops      int
	journaledN int
	// pending, when set, gives each successful Write a pending (called
	// without wmu).
	pending func() func() error
}

func (l *fakeLog) Stopped() error { return l.stopped }

func (l *fakeLog) Write(c chunkwriter.Chunk, data []byte, off int64) (pending func() error, werr, serr error, journaled bool) {
	if l.writeHook != nil {
		l.writeHook()
	}
	l.wmu.Lock()
	if len(l.writeErrs) > 0 {
		werr, l.writeErrs = l.writeErrs[0], l.writeErrs[1:]
	}
	if len(l.syncErrs) > 0 && werr == nil {
		serr, l.syncErrs = l.syncErrs[0], l.syncErrs[1:]
	}
	viaJournal := l.journaled
	if viaJournal && werr == nil && serr == nil {
		l.commits++
	}
	l.wmu.Unlock()
	if werr != nil {
		return nil, werr, nil, false // nothing written: the data ends at off
	}
	if err := c.WriteAt(data, off); err != nil {
		return nil, err, nil, false
	}
	if viaJournal {
		return nil, nil, serr, serr == nil
	}
	if err := c.Sync(); err != nil {
		return nil, nil, err, false
	}
	if l.pending != nil && serr == nil {
		return l.pending(), nil, nil, false
	}
	return nil, nil, serr, false
}

func (l *fakeLog) Journaled() { l.journaledN++ }

// Publish checks that every record it is given is durable: its line is
// in the chunk's synced bytes, or a journal commit carried it.
func (l *fakeLog) Publish(rs []rec) {
	_, synced, _, _ := l.c.state()
	for _, r := range rs {
		if !l.journaled {
			assert.Contains(l.t, synced, r.line, "record %d is published before it is durable", r.n)
		}
		l.published = append(l.published, r.n)
	}
}

func (l *fakeLog) Dropped(rs []rec) {
	for _, r := range rs {
		l.dropped = append(l.dropped, r.n)
	}
}

func (l *fakeLog) Stop(err error) {
	l.stops++
	l.stopped = err
}

// session is a test session: a mutex, a chunk writer over a fakeChunk and
// a pipeline over both.
type session struct {
	mu   sync.Mutex
	c    *fakeChunk
	w    chunkwriter.Writer
	log  *fakeLog
	p    Pipeline[rec]
	next int
}

func newSession(t *testing.T) *session {
	s := &session{c: &fakeChunk{}}
	s.w = chunkwriter.New(chunkwriter.Config{Files: fakeFiles{s.c}, Dir: "chunks", MaxSize: 1 << 30, Mu: &s.mu,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Embed: func(uint32) []eventline.Entry { return nil }})
	s.log = &fakeLog{t: t, c: s.c}
	s.p = New[rec](&s.mu, &s.w, s.log)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NoError(t, s.w.Rotate()) // chunk 0
	return s
}

// queue queues k records with the mutex held and returns their group.
func (s *session) queue(k int) (*Group, error) {
	if err := s.log.Stopped(); err != nil {
		return nil, err
	}
	for range k {
		n := s.next
		s.next++
		s.w.Enqueue([]byte(lineOf(n)))
		s.p.Add(rec{n: n, line: lineOf(n)})
	}
	return s.p.Join(k), nil
}

// append appends k records and waits for them, as an open session does.
func (s *session) append(k int) error {
	s.mu.Lock()
	g, err := s.queue(k)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	return s.p.Commit(g)
}

// locked runs f with the session's mutex held.
func (s *session) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// lines is the lines of records from, ..., to-1.
func lines(from, to int) string {
	var b strings.Builder
	for n := from; n < to; n++ {
		b.WriteString(lineOf(n))
	}
	return b.String()
}

// seq is from, ..., to-1.
func seq(from, to int) []int {
	var s []int
	for n := from; n < to; n++ {
		s = append(s, n)
	}
	return s
}

var (
	errWrite = errors.New("write refused")
	errSync  = errors.New("sync refused")
)

// TestCommitOneWriter: one writer's appends, each its own group, as a
// failed write or sync leaves them, and what the session does next.
func TestCommitOneWriter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		writeErrs []error
		syncErrs  []error
		journaled bool

		wantErr      error // of the first append
		unsynced     bool  // the first append's error wraps durable.ErrUnsynced
		wantStops    int
		wantDropped  []int
		wantJournal  int // Journaled calls, after both appends
		secondRefuse bool
	}{
		{name: "lone append"},
		{name: "through a journal", journaled: true, wantJournal: 2},
		{name: "failed write", writeErrs: []error{errWrite}, wantErr: errWrite, wantDropped: []int{0}},
		{name: "failed write, not cut back", writeErrs: []error{fmt.Errorf("%w: %w", errWrite, durable.ErrUnsynced)},
			wantErr: errWrite, unsynced: true, wantStops: 1, secondRefuse: true},
		{name: "failed sync", syncErrs: []error{errSync}, wantErr: errSync, unsynced: true, wantStops: 1, secondRefuse: true},
		{name: "failed journal commit", journaled: true, syncErrs: []error{errSync}, wantErr: errSync, unsynced: true,
			wantStops: 1, secondRefuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			s.log.writeErrs, s.log.syncErrs, s.log.journaled = tc.writeErrs, tc.syncErrs, tc.journaled

			err := s.append(1)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, tc.unsynced, errors.Is(err, durable.ErrUnsynced), "wraps durable.ErrUnsynced")
			}
			err = s.append(1)
			if tc.secondRefuse {
				assert.ErrorIs(t, err, durable.ErrUnsynced, "a session whose sync failed refuses writes")
			} else {
				require.NoError(t, err, "the session goes on writing")
			}

			s.locked(func() {
				assert.Empty(t, s.p.Inflight(), "no record stays in flight")
				assert.Equal(t, tc.wantStops, s.log.stops)
				assert.Equal(t, tc.wantDropped, s.log.dropped)
				assert.Equal(t, tc.wantJournal, s.log.journaledN)
				assert.False(t, s.p.Syncing())
				switch {
				case tc.secondRefuse:
					assert.Empty(t, s.log.published)
				case tc.wantErr != nil:
					// The failed write's record is gone: the next one
					// takes its place in the chunk.
					assert.Equal(t, []int{1}, s.log.published)
					assert.Equal(t, int64(len(lineOf(1))), s.w.Size())
				default:
					assert.Equal(t, []int{0, 1}, s.log.published)
					assert.Equal(t, int64(len(lines(0, 2))), s.w.Size())
				}
			})
			data, synced, _, _ := s.c.state()
			switch {
			case tc.secondRefuse:
			case tc.wantErr != nil:
				assert.Equal(t, lineOf(1), data)
			case tc.journaled:
				assert.Equal(t, lines(0, 2), data)
				assert.Empty(t, synced, "journaled bytes are not synced in the chunk")
				// A checkpoint syncs them: the pipeline marked the
				// chunk writer unsynced.
				s.locked(func() { require.NoError(t, s.w.Checkpoint()) })
				_, synced, _, _ = s.c.state()
				assert.Equal(t, lines(0, 2), synced)
			default:
				assert.Equal(t, lines(0, 2), synced)
			}
		})
	}
}

// holdWrites makes the session's next write wait, in Write, until the
// returned release is called; entered is closed once it waits.
func holdWrites(s *session) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.log.writeHook = func() {
		once.Do(func() {
			close(in)
			<-out
		})
	}
	return in, func() { close(out) }
}

// waitInflight waits until n records are in flight.
func waitInflight(t *testing.T, s *session, n int) {
	t.Helper()
	for {
		var got int
		s.locked(func() { got = len(s.p.Inflight()) })
		if got == n {
			return
		}
		require.Less(t, got, n)
		time.Sleep(100 * time.Microsecond)
	}
}

// TestCommitConcurrentWriters: appends that come during a write and sync
// join the next group and share its write and sync; a failed write or
// sync fails every group waiting, not only the one written.
func TestCommitConcurrentWriters(t *testing.T) {
	const writers = 16
	for _, tc := range []struct {
		name      string
		writeErrs []error
		syncErrs  []error

		wantErr  error // of every append
		unsynced bool
		stops    int
	}{
		{name: "share syncs"},
		{name: "failed write", writeErrs: []error{errWrite}, wantErr: errWrite},
		{name: "failed sync", syncErrs: []error{errSync}, wantErr: errSync, unsynced: true, stops: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			s.log.writeErrs, s.log.syncErrs = tc.writeErrs, tc.syncErrs
			entered, release := holdWrites(s)
			errs := make([]error, writers)
			var wg sync.WaitGroup
			wg.Go(func() { errs[0] = s.append(1) })
			<-entered // the first group is being written
			for i := 1; i < writers; i++ {
				wg.Go(func() { errs[i] = s.append(1) })
			}
			waitInflight(t, s, writers) // every other append joined the next group
			s.locked(func() { assert.True(t, s.p.Syncing()) })
			release()
			wg.Wait()

			_, synced, writes, syncs := s.c.state()
			s.locked(func() {
				assert.Empty(t, s.p.Inflight())
				assert.Equal(t, tc.stops, s.log.stops)
			})
			if tc.wantErr == nil {
				for i, err := range errs {
					assert.NoError(t, err, "append %d", i)
				}
				assert.Equal(t, 2, writes, "one write for the first append, one for the 15 others")
				assert.Equal(t, 2, syncs, "one sync for the first append, one for the 15 others")
				assert.ElementsMatch(t, seq(0, writers), s.log.published)
				assert.Equal(t, lines(0, writers), synced[:len(lines(0, writers))], "records published in the order they were queued")
				return
			}
			for i, err := range errs {
				assert.ErrorIs(t, err, tc.wantErr, "append %d", i)
				assert.Equal(t, tc.unsynced, errors.Is(err, durable.ErrUnsynced), "append %d", i)
			}
			assert.Empty(t, s.log.published)
			assert.LessOrEqual(t, writes, 1, "no group written after the failed one")
			if !tc.unsynced {
				assert.Equal(t, seq(0, writers), s.log.dropped, "every record in flight is dropped")
				s.locked(func() { assert.Zero(t, s.w.Size(), "the chunk's data ends where the failed write began") })
				require.NoError(t, s.append(1), "the session goes on after a failed write")
				_, synced, _, _ = s.c.state()
				assert.Equal(t, lineOf(writers), synced)
			} else {
				assert.ErrorIs(t, s.append(1), durable.ErrUnsynced, "the session stops after a failed sync")
			}
		})
	}
}

// TestCommitStoppedWhileWaiting: a group whose session stopped writing
// while it waited for the sync before it is never written.
func TestCommitStoppedWhileWaiting(t *testing.T) {
	s := newSession(t)
	entered, release := holdWrites(s)
	var first, second error
	var wg sync.WaitGroup
	wg.Go(func() { first = s.append(1) })
	<-entered
	wg.Go(func() { second = s.append(2) })
	waitInflight(t, s, 3)
	stop := errors.New("stopped")
	s.locked(func() { s.log.stopped = stop })
	release()
	wg.Wait()
	assert.NoError(t, first, "the group written before the stop is durable")
	assert.ErrorIs(t, second, stop)
	_, synced, writes, _ := s.c.state()
	assert.Equal(t, 1, writes)
	assert.Equal(t, lineOf(0), synced)
	s.locked(func() {
		assert.Empty(t, s.p.Inflight())
		assert.False(t, s.w.Queued(), "the stopped group's bytes are dropped")
	})
}

// TestSettle: Settle writes what is in flight with the mutex held and
// publishes it; through a journal it syncs the chunk too.
func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		journaled bool
		syncErrs  []error
		wantErr   error
		wantSyncs int
	}{
		{name: "chunk", wantSyncs: 1},
		{name: "journal", journaled: true, wantSyncs: 1},
		{name: "failed sync", syncErrs: []error{errSync}, wantErr: errSync, wantSyncs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			s.log.journaled, s.log.syncErrs = tc.journaled, tc.syncErrs
			s.mu.Lock()
			g, err := s.queue(3)
			require.NoError(t, err)
			err = s.p.Settle()
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
				assert.ErrorIs(t, err, durable.ErrUnsynced)
				assert.Equal(t, 1, s.log.stops)
			} else {
				require.NoError(t, err)
				assert.Equal(t, seq(0, 3), s.log.published)
				assert.Equal(t, 1, s.p.Settled())
			}
			assert.Empty(t, s.p.Inflight())
			// The group is finished: its caller's Commit returns at once.
			commitErr := s.p.Commit(g) // unlocks
			if tc.wantErr != nil {
				assert.ErrorIs(t, commitErr, tc.wantErr)
			} else {
				assert.NoError(t, commitErr)
			}
			_, synced, _, syncs := s.c.state()
			if tc.wantErr == nil {
				assert.Equal(t, lines(0, 3), synced, "a settled chunk holds its records durably")
			}
			assert.Equal(t, tc.wantSyncs, syncs)
			s.locked(func() {
				if tc.wantErr != nil {
					assert.ErrorIs(t, s.p.Settle(), durable.ErrUnsynced, "a stopped session settles nothing")
				} else {
					assert.NoError(t, s.p.Settle(), "nothing in flight: nothing to do")
				}
			})
		})
	}
}

// stepClock is a clock that moves on by step at each reading, and calls
// at (if set) with the reading's number, from 1, with the session's mutex
// held: a test's appends come between a leader's yields.
type stepClock struct {
	t     time.Time
	step  time.Duration
	reads int
	at    func(read int)
}

func (c *stepClock) now() time.Time {
	c.reads++
	if c.at != nil {
		c.at(c.reads)
	}
	c.t = c.t.Add(c.step)
	return c.t
}

// TestGather: a leader whose last sync covered several records yields
// until as many have joined, until GatherWait, or until most have come
// and the rest lag (GatherLag). Its clock moves on 20µs at each reading
// (more than GatherLag); joins come between its yields.
func TestGather(t *testing.T) {
	const step = 20 * time.Microsecond
	require.Greater(t, step, GatherLag)
	for _, tc := range []struct {
		name      string
		lastBatch int
		joins     map[int]int // reading number -> records joining just before it
		// wantReads is how many times the leader read the clock: 0 when
		// it did not gather, 1 + its yields otherwise.
		wantReads   int
		wantRecords int // in the leader's write
	}{
		{name: "lone writer never waits", lastBatch: 1, wantReads: 0, wantRecords: 1},
		{name: "nobody comes: until GatherWait", lastBatch: 4, wantReads: 1 + int(GatherWait/step), wantRecords: 1},
		{name: "all come: at once", lastBatch: 4, joins: map[int]int{2: 2, 3: 1}, wantReads: 3, wantRecords: 4},
		{name: "half come, the rest lag: stops early", lastBatch: 4, joins: map[int]int{2: 1}, wantReads: 3, wantRecords: 2},
		{name: "fewer than half come: until GatherWait", lastBatch: 5, joins: map[int]int{2: 1}, wantReads: 1 + int(GatherWait/step), wantRecords: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			// A group of lastBatch records first: the last sync covered them.
			s.mu.Lock()
			g, err := s.queue(tc.lastBatch)
			require.NoError(t, err)
			require.NoError(t, s.p.Commit(g))
			_, _, writesBefore, _ := s.c.state()

			clock := &stepClock{t: time.Unix(0, 0), step: step}
			clock.at = func(read int) {
				if k := tc.joins[read]; k > 0 {
					_, err := s.queue(k) // joins the leader's group
					require.NoError(t, err)
				}
			}
			s.locked(func() { s.p.now = clock.now })
			require.NoError(t, s.append(1))

			data, _, writes, _ := s.c.state()
			assert.Equal(t, tc.wantReads, clock.reads, "clock readings")
			assert.Equal(t, writesBefore+1, writes, "one write for the leader's group")
			assert.Equal(t, lines(0, tc.lastBatch+tc.wantRecords), data)
			s.locked(func() {
				assert.Empty(t, s.p.Inflight(), "every record that joined is published with the leader's")
				assert.Equal(t, tc.wantRecords, s.p.lastBatch)
			})
		})
	}
}
