package sessionstore

import (
	"context"
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

// remoteFaultWorkload appends to one session through two opens of a
// Store on obj, with small chunks (sealing), a blob, a metadata update
// and closes, and returns the texts of the events whose appends returned
// nil and of all it tried, in order. Errors of calls are returned for the
// test to check their types.
func remoteFaultWorkload(t *testing.T, obj *memObjects, id uuid.UUID) (acked, tried []string, errs []error) {
	return remoteFaultWorkloadN(t, obj, id, 1)
}

// remoteFaultWorkloadN is remoteFaultWorkload with writers goroutines
// appending side by side (acked and tried then in no particular order).
func remoteFaultWorkloadN(t *testing.T, obj *memObjects, id uuid.UUID, writers int) (acked, tried []string, errs []error) {
	return remoteFaultWorkloadIn(t, obj, id, writers, t.TempDir(), nil)
}

// remoteFaultWorkloadIn is remoteFaultWorkloadN in the Store directory
// dir, with the options tuned by tune (when not nil).
func remoteFaultWorkloadIn(t *testing.T, obj *memObjects, id uuid.UUID, writers int, dir string, tune func(*Options)) (acked, tried []string, errs []error) {
	ctx := context.Background()
	opts := remoteOpts(obj)
	opts.ChunkSize = 2 << 10
	if tune != nil {
		tune(opts)
	}
	n := 0
	var mu sync.Mutex
	appendSome := func(s *Store, k int) {
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for {
					mu.Lock()
					if k == 0 {
						mu.Unlock()
						return
					}
					k--
					text := fmt.Sprintf("event %d %s", n, strings.Repeat("w", n%5*60))
					if n == 7 {
						text += strings.Repeat("blob", 5000)
					}
					n++
					tried = append(tried, text)
					mu.Unlock()
					_, err := s.Append(ctx, id, textEv(text))
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						acked = append(acked, text)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	for round := range 2 {
		s, err := Open(dir, opts)
		require.NoError(t, err)
		if round == 0 {
			if _, err := s.Create(ctx, Meta{ID: id, Name: "faults"}); err != nil {
				errs = append(errs, err)
			}
		}
		appendSome(s, 12)
		if _, err := s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = fmt.Sprintf("round %d", round) }); err != nil {
			errs = append(errs, err)
		}
		appendSome(s, 6)
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return acked, tried, errs
}

// TestRemoteFaultAtEveryCall fails each object store call of a workload
// in turn, once with the call not applied and once applied but answered
// with an error (a reply lost on the way back), then opens the session
// into an empty directory: every acknowledged event is there, in order,
// nothing that was not tried, the session opens and appends, and every
// error the workload saw is typed.
func TestRemoteFaultAtEveryCall(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	calls, step := faultCalls(t, newMemObjects(), 1)
	runs := 0
	for k := 1; k <= calls; k += step {
		for _, applied := range []bool{false, true} {
			obj := newMemObjects()
			seen := 0
			obj.fail = func(op, key string) (error, bool) {
				seen++
				if seen == k {
					return fmt.Errorf("injected failure of %s %s", op, key), applied
				}
				return nil, false
			}
			id := uuid.Must(uuid.NewV7())
			acked, tried, errs := remoteFaultWorkload(t, obj, id)
			runs++
			for _, err := range errs {
				typed := errors.Is(err, ErrRemote) || errors.Is(err, ErrSessionFailed) || errors.Is(err, ErrLocked) || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound)
				assert.True(t, typed, "call %d (applied %v): untyped error %v", k, applied, err)
			}
			obj.mu.Lock()
			obj.fail = nil
			obj.mu.Unlock()
			obj.advance(2 * time.Minute) // past any lease left held
			s, err := Open(t.TempDir(), remoteOpts(obj))
			require.NoError(t, err)
			if errors.Is(errs0(errs), ErrNotFound) && len(acked) == 0 {
				s.Close()
				continue
			}
			got, err := s.Load(context.Background(), id)
			if len(acked) == 0 && errors.Is(err, ErrNotFound) {
				s.Close()
				continue // the Create failed
			}
			require.NoError(t, err, "call %d (applied %v): the session opens", k, applied)
			texts := make([]string, len(got))
			for i, e := range got {
				texts[i] = decodeText(t, e)
			}
			assert.True(t, subsequence(acked, texts), "call %d (applied %v): every acknowledged event, in order", k, applied)
			assert.True(t, subsequence(texts, tried), "call %d (applied %v): only events tried", k, applied)
			_, err = s.Append(context.Background(), id, textEv("after"))
			assert.NoError(t, err, "call %d (applied %v)", k, applied)
			require.NoError(t, s.Close())
		}
	}
	t.Logf("%d calls in the workload, %d runs with a fault", calls, runs)
}

// TestRemoteFaultAtEveryCallConcurrent is TestRemoteFaultAtEveryCall
// with four writers appending side by side and each Create of the object
// store taking a millisecond, so that several commit groups' log objects
// are in flight when a call fails: every acknowledged event is there
// after the fault (in any order the appends took), nothing that was not
// tried, and the session opens and appends.
func TestRemoteFaultAtEveryCallConcurrent(t *testing.T) {
	t.Parallel()
	const writers = 4
	slow := func(obj *memObjects) {
		obj.gate = func(key string) {
			if strings.Contains(key, "/log/") {
				time.Sleep(time.Millisecond)
			}
		}
	}
	clean := newMemObjects()
	slow(clean)
	calls, step := faultCalls(t, clean, writers)
	runs := 0
	for k := 1; k <= calls; k += step {
		for _, applied := range []bool{false, true} {
			obj := newMemObjects()
			slow(obj)
			var seen atomic.Int64
			obj.fail = func(op, key string) (error, bool) {
				if seen.Add(1) == int64(k) {
					return fmt.Errorf("injected failure of %s %s", op, key), applied
				}
				return nil, false
			}
			id := uuid.Must(uuid.NewV7())
			acked, tried, errs := remoteFaultWorkloadN(t, obj, id, writers)
			runs++
			for _, err := range errs {
				typed := errors.Is(err, ErrRemote) || errors.Is(err, ErrSessionFailed) || errors.Is(err, ErrLocked) || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound)
				assert.True(t, typed, "call %d (applied %v): untyped error %v", k, applied, err)
			}
			obj.mu.Lock()
			obj.fail = nil
			obj.mu.Unlock()
			obj.advance(2 * time.Minute)
			s, err := Open(t.TempDir(), remoteOpts(obj))
			require.NoError(t, err)
			got, err := s.Load(context.Background(), id)
			if len(acked) == 0 && errors.Is(err, ErrNotFound) {
				s.Close()
				continue // the Create failed
			}
			require.NoError(t, err, "call %d (applied %v): the session opens", k, applied)
			texts := map[string]bool{}
			for _, e := range got {
				text := decodeText(t, e)
				assert.False(t, texts[text], "call %d (applied %v): %q twice", k, applied, text)
				texts[text] = true
			}
			for _, a := range acked {
				assert.True(t, texts[a], "call %d (applied %v): acknowledged %.20q is lost", k, applied, a)
			}
			for _, x := range tried {
				delete(texts, x)
			}
			assert.Empty(t, texts, "call %d (applied %v): only events tried", k, applied)
			_, err = s.Append(context.Background(), id, textEv("after"))
			assert.NoError(t, err, "call %d (applied %v)", k, applied)
			require.NoError(t, s.Close())
		}
	}
	t.Logf("%d calls in the workload, %d runs with a fault, %d writers", calls, runs, writers)
}

// faultCalls runs the workload with writers on clean, without a fault,
// and returns the object store calls it made and the step between the
// calls the test fails in turn.
func faultCalls(t *testing.T, clean *memObjects, writers int) (calls, step int) {
	acked, _, errs := remoteFaultWorkloadN(t, clean, uuid.Must(uuid.NewV7()), writers)
	require.Empty(t, errs)
	require.Len(t, acked, 36)
	for _, c := range clean.calls {
		calls += c
	}
	return calls, max(1, calls/testSize(t, "SESSIONSTORE_REMOTE_FAULTS", 5, calls))
}

func errs0(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

func decodeText(t *testing.T, e Event) string {
	var r struct{ Text string }
	require.NoError(t, e.Decode(&r))
	return r.Text
}

// subsequence reports whether a's elements appear in b in order.
func subsequence(a, b []string) bool {
	i := 0
	for _, x := range b {
		if i < len(a) && a[i] == x {
			i++
		}
	}
	return i == len(a)
}
