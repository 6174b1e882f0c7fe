package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReviewAckLocalForkAtUnstoredEvent: with DurableLocal, Fork accepts as its
// fork point an event acknowledged after the local sync whose data
// object's Create is still in flight; the fork is created in the object
// store (its create marker) while its prefix is not, so the fork cannot
// be read (here, in the same Store, while the parent's Create is still
// in flight).
func TestReviewAckLocalForkAtUnstoredEvent(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	s, err := Open(t.TempDir(), ackLocalOpts(obj))
	require.NoError(t, err)
	defer s.Close()
	id := uuid.Must(uuid.NewV7())
	_, err = s.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	_, err = s.Append(ctx, id, textEv("stored"))
	require.NoError(t, err)
	_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "settled" })
	require.NoError(t, err)

	release := make(chan struct{})
	var held atomic.Int64
	parentLog := "sessions/" + id.String() + "/log/"
	obj.mu.Lock()
	obj.gate = func(key string) {
		if strings.Contains(key, parentLog) {
			held.Add(1)
			<-release
		}
	}
	obj.mu.Unlock()
	ev, err := s.Append(ctx, id, textEv("acked, not stored"))
	require.NoError(t, err)
	require.Equal(t, int64(1), held.Load())

	var released atomic.Bool
	go func() {
		time.Sleep(50 * time.Millisecond)
		released.Store(true)
		close(release)
	}()
	fm, err := s.Fork(ctx, id, ev.ID)
	require.NoError(t, err)
	assert.True(t, released.Load(), "Fork waited for its fork point's Create")

	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, lerr := s.Load(lctx, fm.ID)
	require.NoError(t, lerr, "the fork just created, read while its fork point's Create is in flight")
}

// ackLocalHeldFailed is ackLocalUnstored without closing the Store: it
// returns the Store, with the session failed after held acknowledged
// groups' Creates failed.
func ackLocalHeldFailed(t *testing.T, obj *memObjects, dir string, o *Options, stored, held int) (*Store, uuid.UUID, []string) {
	ctx := context.Background()
	s, err := Open(dir, o)
	require.NoError(t, err)
	id := uuid.Must(uuid.NewV7())
	_, err = s.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	var want []string
	for i := range stored {
		text := fmt.Sprintf("stored %d", i)
		_, err := s.Append(ctx, id, textEv(text))
		require.NoError(t, err)
		want = append(want, text)
	}
	_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "settled" })
	require.NoError(t, err)
	release := make(chan struct{})
	obj.mu.Lock()
	obj.gate = func(key string) {
		if strings.Contains(key, "/log/") {
			<-release
		}
	}
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.Contains(key, "/log/") {
			return errors.New("injected: the object store is unreachable"), false
		}
		return nil, false
	}
	obj.mu.Unlock()
	for i := range held {
		text := fmt.Sprintf("held %d", i)
		_, err := s.Append(ctx, id, textEv(text))
		require.NoError(t, err)
		want = append(want, text)
	}
	close(release)
	require.Eventually(t, func() bool {
		_, err := s.Append(ctx, id, textEv("after the failure"))
		return errors.Is(err, ErrRemote) || errors.Is(err, ErrSessionFailed)
	}, 10*time.Second, 5*time.Millisecond)
	obj.mu.Lock()
	obj.gate, obj.fail = nil, nil
	obj.mu.Unlock()
	return s, id, want
}

// TestReviewAckLocalSameStoreAfterFailure: the doc says the next open
// of the session by this Store after a failed Create stores the tail;
// here the Store stays open and the session is used again.
func TestReviewAckLocalSameStoreAfterFailure(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dir := t.TempDir()
	s, id, want := ackLocalHeldFailed(t, obj, dir, ackLocalOpts(obj), 2, 2)
	defer s.Close()
	var got []string
	require.Eventually(t, func() bool {
		evs, err := s.Load(ctx, id)
		if err != nil {
			return false
		}
		got = got[:0]
		for _, e := range evs {
			var r struct{ Text string }
			_ = json.Unmarshal(e.Record, &r)
			got = append(got, r.Text)
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, want, got[:min(len(got), len(want))])
	// Another Store elsewhere: the acknowledged events are stored once
	// the session was used again here.
	_, err := s.Append(ctx, id, textEv("next"))
	t.Logf("append after the failure in the same Store: %v", err)
	other, err := Open(t.TempDir(), &Options{Remote: obj, ReadOnly: true})
	require.NoError(t, err)
	defer other.Close()
	got2 := loadTexts(t, other, id)
	require.Equal(t, want, got2[:min(len(got2), len(want))], "stored by the same Store's next open of the session")
}

// TestReviewAckLocalRoundsWithRotation: rounds in one directory, small
// chunks (rotations and sealings), each round failing one log Create
// after some appends; every acknowledged event must be in the session,
// in order, from another Store at the end.
func TestReviewAckLocalRoundsWithRotation(t *testing.T) {
	for _, seed := range []int{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			obj := newMemObjects()
			dir := t.TempDir()
			opts := func() *Options {
				o := ackLocalOpts(obj)
				o.ChunkSize = 600
				o.RemoteWindow = 3
				return o
			}
			var acked, tried []string
			id := uuid.Must(uuid.NewV7())
			n := 0
			for round := range 6 {
				s, err := Open(dir, opts())
				require.NoError(t, err)
				if round == 0 {
					_, err = s.Create(ctx, Meta{ID: id})
					require.NoError(t, err)
				}
				var creates atomic.Int64
				failAt := int64(3 + (seed*7+round*5)%9)
				obj.mu.Lock()
				obj.gate = func(key string) {
					if strings.Contains(key, "/log/") {
						time.Sleep(time.Millisecond)
					}
				}
				obj.fail = func(op, key string) (error, bool) {
					if op == "create" && strings.Contains(key, "/log/") && creates.Add(1) == failAt {
						return errors.New("injected"), (seed+round)%2 == 0
					}
					return nil, false
				}
				obj.mu.Unlock()
				for range 30 {
					text := fmt.Sprintf("e%d-%s", n, strings.Repeat("x", 40+(n*37)%150))
					n++
					tried = append(tried, text)
					_, err := s.Append(ctx, id, textEv(text))
					if err != nil {
						break
					}
					acked = append(acked, text)
				}
				_ = s.Close()
				obj.mu.Lock()
				obj.gate, obj.fail = nil, nil
				obj.mu.Unlock()
			}
			s, err := Open(dir, opts())
			require.NoError(t, err)
			got := loadTexts(t, s, id)
			require.NoError(t, s.Close())
			require.True(t, subsequence(acked, got), "same dir: every acknowledged event, in order\nacked %v\ngot %v", acked, got)
			other, err := Open(t.TempDir(), remoteOpts(obj))
			require.NoError(t, err)
			got = loadTexts(t, other, id)
			require.NoError(t, other.Close())
			require.True(t, subsequence(acked, got), "elsewhere: every acknowledged event, in order\nacked %v\ngot %v", acked, got)
			require.True(t, subsequence(got, tried), "only events tried, once each")
		})
	}
}

// TestReviewAckLocalTailInFreshChunk: the acknowledged, unstored group is
// the first of a new chunk (the log holds none of that chunk).
func TestReviewAckLocalTailInFreshChunk(t *testing.T) {
	for _, compression := range []string{"", "none"} {
		t.Run(compression, func(t *testing.T) {
			ctx := context.Background()
			obj := newMemObjects()
			dir := t.TempDir()
			opts := func() *Options {
				o := ackLocalOpts(obj)
				o.ChunkSize = 400
				if compression != "" {
					o.Compression = compression
				}
				return o
			}
			s, err := Open(dir, opts())
			require.NoError(t, err)
			id := uuid.Must(uuid.NewV7())
			_, err = s.Create(ctx, Meta{ID: id})
			require.NoError(t, err)
			var want []string
			for i := range 3 {
				text := fmt.Sprintf("stored %d %s", i, strings.Repeat("s", 200))
				_, err := s.Append(ctx, id, textEv(text))
				require.NoError(t, err)
				want = append(want, text)
			}
			_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "settled" })
			require.NoError(t, err)
			release := make(chan struct{})
			obj.mu.Lock()
			obj.gate = func(key string) {
				if strings.Contains(key, "/log/") {
					<-release
				}
			}
			obj.fail = func(op, key string) (error, bool) {
				if op == "create" && strings.Contains(key, "/log/") {
					return errors.New("injected"), false
				}
				return nil, false
			}
			obj.mu.Unlock()
			text := "held " + strings.Repeat("h", 200)
			_, err = s.Append(ctx, id, textEv(text))
			require.NoError(t, err)
			want = append(want, text)
			close(release)
			time.Sleep(50 * time.Millisecond)
			_ = s.Close()
			obj.mu.Lock()
			obj.gate, obj.fail = nil, nil
			obj.mu.Unlock()

			s, err = Open(dir, opts())
			require.NoError(t, err)
			got := loadTexts(t, s, id)
			require.NoError(t, s.Close())
			require.Equal(t, want, got, "same directory")
			other, err := Open(t.TempDir(), remoteOpts(obj))
			require.NoError(t, err)
			got = loadTexts(t, other, id)
			require.NoError(t, other.Close())
			require.Equal(t, want, got, "elsewhere")
		})
	}
}

// TestReviewAckLocalStoreTailFailsHalfway: a tail of more than
// tailObject bytes is stored as several data objects; the reopen's
// second one fails (applied or not); the next reopen stores the rest,
// and every acknowledged event is in the log, once.
func TestReviewAckLocalStoreTailFailsHalfway(t *testing.T) {
	for _, tc := range []struct {
		applied bool
		failAt  int64
	}{{false, 4}, {true, 4}, {false, 5}, {true, 5}} {
		applied, failAt := tc.applied, tc.failAt
		t.Run(fmt.Sprint(applied, failAt), func(t *testing.T) {
			ctx := context.Background()
			obj := newMemObjects()
			dir := t.TempDir()
			opts := func() *Options {
				o := ackLocalOpts(obj)
				o.BlobThreshold = -1
				o.RemoteTimeout = 5 * time.Second
				return o
			}
			s, err := Open(dir, opts())
			require.NoError(t, err)
			id := uuid.Must(uuid.NewV7())
			_, err = s.Create(ctx, Meta{ID: id})
			require.NoError(t, err)
			_, err = s.Append(ctx, id, textEv("stored"))
			require.NoError(t, err)
			_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "settled" })
			require.NoError(t, err)
			want := []string{"stored"}
			release := make(chan struct{})
			obj.mu.Lock()
			obj.gate = func(key string) {
				if strings.Contains(key, "/log/") {
					<-release
				}
			}
			obj.fail = func(op, key string) (error, bool) {
				if op == "create" && strings.Contains(key, "/log/") {
					return errors.New("injected"), false
				}
				return nil, false
			}
			obj.mu.Unlock()
			for i := range 3 {
				text := fmt.Sprintf("big %d %s", i, strings.Repeat("b", 1800<<10))
				_, err := s.Append(ctx, id, textEv(text))
				require.NoError(t, err)
				want = append(want, text)
			}
			close(release)
			time.Sleep(50 * time.Millisecond)
			_ = s.Close()
			var creates atomic.Int64
			obj.mu.Lock()
			obj.gate = nil
			obj.fail = func(op, key string) (error, bool) {
				if op == "create" && strings.Contains(key, "/log/") && creates.Add(1) == failAt {
					return errors.New("injected: the second tail object"), applied
				}
				return nil, false
			}
			obj.mu.Unlock()
			s, err = Open(dir, opts())
			require.NoError(t, err)
			_, lerr := s.Load(ctx, id)
			t.Logf("reopen with a log Create failing: %v (%d log creates)", lerr, creates.Load())
			_ = s.Close()
			obj.mu.Lock()
			obj.fail = nil
			obj.mu.Unlock()

			short := func(xs []string) []string {
				out := make([]string, len(xs))
				for i, x := range xs {
					out[i] = x[:min(len(x), 8)]
				}
				return out
			}
			s, err = Open(dir, opts())
			require.NoError(t, err)
			got := loadTexts(t, s, id)
			require.NoError(t, s.Close())
			require.Equal(t, short(want), short(got), "same directory")
			other, err := Open(t.TempDir(), remoteOpts(obj))
			require.NoError(t, err)
			got = loadTexts(t, other, id)
			require.NoError(t, other.Close())
			require.Equal(t, short(want), short(got), "elsewhere")
		})
	}
}

// TestReviewAckLocalHealthyStoreLosesTail: one transient Create failure
// (the object store answers again at once) and a Store that stays up and
// connected: the session fails, its renewal stops (renewLease skips a
// lease with Lost), and nothing stores the acknowledged tail until the
// application happens to call the session again. If it does not within
// LeaseTime, another Store takes the session over and the acknowledged
// events are gone, though this Store neither crashed nor was cut off.
func TestReviewAckLocalHealthyStoreLosesTail(t *testing.T) {
	obj := newMemObjects()
	dir := t.TempDir()
	s, id, want := ackLocalHeldFailed(t, obj, dir, ackLocalOpts(obj), 2, 2)
	defer s.Close()
	// The object store is reachable again (ackLocalHeldFailed cleared the
	// faults); the Store is alive. An idle turn of the agent:
	time.Sleep(200 * time.Millisecond)
	obj.advance(2 * time.Minute)
	taker, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer taker.Close()
	got := loadTexts(t, taker, id)
	require.Equal(t, want, got[:min(len(got), len(want))], "acknowledged events lost by a healthy Store after one failed Create")
}

// TestReviewAckLocalConcurrentRotations: appends from several goroutines
// with small chunks (rotations, background sealings: settleLocal under
// the session's mutex and in the sealer) and slow Creates; then a meta
// update and Close. Must not deadlock; every acknowledged event stored.
func TestReviewAckLocalConcurrentRotations(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	obj.gate = func(key string) {
		if strings.Contains(key, "/log/") || strings.Contains(key, "/chunks/") {
			time.Sleep(time.Millisecond)
		}
	}
	o := ackLocalOpts(obj)
	o.ChunkSize = 2 << 10
	s, err := Open(t.TempDir(), o)
	require.NoError(t, err)
	id := uuid.Must(uuid.NewV7())
	_, err = s.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				text := fmt.Sprintf("g%d-%d %s", g, i, strings.Repeat("y", (g*31+i*17)%300))
				if _, err := s.Append(ctx, id, textEv(text)); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				acked[text] = true
				mu.Unlock()
				if i%10 == 0 {
					_, _ = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = text[:5] })
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock: appends did not finish")
	}
	require.NoError(t, s.Close())
	other, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	got := loadTexts(t, other, id)
	require.NoError(t, other.Close())
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for a := range acked {
		require.Equal(t, 1, seen[a], "acknowledged %q", a)
	}
}

// TestReviewAckLocalGapThenLanded: the first held group's Create fails,
// the later ones land (after a number the lease does not hold); the
// reopen stores the tail again: each acknowledged event must be there
// once, in order, here and elsewhere.
func TestReviewAckLocalGapThenLanded(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dir := t.TempDir()
	s, err := Open(dir, ackLocalOpts(obj))
	require.NoError(t, err)
	id := uuid.Must(uuid.NewV7())
	_, err = s.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	want := []string{"stored"}
	_, err = s.Append(ctx, id, textEv("stored"))
	require.NoError(t, err)
	_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "settled" })
	require.NoError(t, err)
	release := make(chan struct{})
	var first atomic.Value
	obj.mu.Lock()
	obj.gate = func(key string) {
		if strings.Contains(key, "/log/") {
			first.CompareAndSwap(nil, key)
			<-release
		}
	}
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && key == first.Load() {
			return errors.New("injected: the first held Create"), false
		}
		return nil, false
	}
	obj.mu.Unlock()
	for i := range 3 {
		text := fmt.Sprintf("held %d", i)
		_, err := s.Append(ctx, id, textEv(text))
		require.NoError(t, err)
		want = append(want, text)
	}
	close(release)
	time.Sleep(50 * time.Millisecond)
	_ = s.Close()
	obj.mu.Lock()
	obj.gate, obj.fail = nil, nil
	obj.mu.Unlock()
	s, err = Open(dir, ackLocalOpts(obj))
	require.NoError(t, err)
	got := loadTexts(t, s, id)
	require.NoError(t, s.Close())
	require.Equal(t, want, got, "same directory")
	other, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	got = loadTexts(t, other, id)
	require.NoError(t, other.Close())
	require.Equal(t, want, got, "elsewhere")
}

// TestReviewAckLocalForkPointLostWithWindow: a fork made at an
// acknowledged, unstored event (Fork succeeds: the fork's create marker
// is stored) whose Create then fails; the parent's tail is in the
// documented loss window, but the fork, a session whose Create returned
// nil, then cannot be opened by any Store once another Store takes the
// parent over.
func TestReviewAckLocalForkPointLostWithWindow(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dir := t.TempDir()
	s, err := Open(dir, ackLocalOpts(obj))
	require.NoError(t, err)
	id := uuid.Must(uuid.NewV7())
	_, err = s.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	_, err = s.Append(ctx, id, textEv("stored"))
	require.NoError(t, err)
	_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "settled" })
	require.NoError(t, err)
	release := make(chan struct{})
	parentLog := "sessions/" + id.String() + "/log/"
	obj.mu.Lock()
	obj.gate = func(key string) {
		if strings.Contains(key, parentLog) {
			<-release
		}
	}
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.Contains(key, parentLog) {
			return errors.New("injected"), false
		}
		return nil, false
	}
	obj.mu.Unlock()
	ev, err := s.Append(ctx, id, textEv("acked, not stored"))
	require.NoError(t, err)
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	_, err = s.Fork(ctx, id, ev.ID)
	require.ErrorIs(t, err, ErrRemote, "the fork point's Create failed: no fork")
	_ = s.Close()
	obj.mu.Lock()
	obj.gate, obj.fail = nil, nil
	obj.mu.Unlock()
	obj.advance(2 * time.Minute)
	other, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Load(ctx, id) // takes the parent over: its tail is cut
	require.NoError(t, err)
}
