package sessiontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// ObjectStoreConfig describes the binding ObjectStoreConformance checks.
type ObjectStoreConfig struct {
	// ClockStep is how far the object store's modification times may be
	// from this process's clock (S3's Last-Modified is in seconds: a
	// second).
	ClockStep time.Duration
	// ListAfter says that the binding lists from a key on
	// (sessionstore.ObjectListerAfter without errors.ErrUnsupported).
	// When false, a binding that has the method must answer
	// errors.ErrUnsupported with no objects.
	ListAfter bool
}

// ObjectStoreConformance runs the contract of sessionstore.ObjectStore
// against a binding, as subtests of t: Create is create-only (32 Creates
// of one key at once, 20 rounds: exactly one wins, and the object holds
// its data), Get's ranges, absent keys, Put replacing, List and Stat
// (key order, sizes, the object store's modification times), listings
// longer than a page, and ListAfter. open returns a new, empty store for
// each subtest. Errors must match the sessionstore sentinels and name the
// key.
func ObjectStoreConformance(t *testing.T, open func(t *testing.T) sessionstore.ObjectStore, cfg ObjectStoreConfig) {
	t.Run("CreateIsCreateOnly", func(t *testing.T) { conformCreate(t, open(t)) })
	t.Run("Get", func(t *testing.T) { conformGet(t, open(t)) })
	t.Run("Absent", func(t *testing.T) { conformAbsent(t, open(t)) })
	t.Run("PutReplaces", func(t *testing.T) { conformPut(t, open(t)) })
	t.Run("ListAndStat", func(t *testing.T) { conformList(t, open(t), cfg.ClockStep) })
	t.Run("ListPages", func(t *testing.T) {
		if testing.Short() {
			t.Skip("writes 1,100 objects")
		}
		conformListPages(t, open(t))
	})
	t.Run("ConcurrentCreate", func(t *testing.T) { conformConcurrentCreate(t, open(t)) })
	t.Run("ListAfter", func(t *testing.T) { conformListAfter(t, open(t), cfg.ListAfter) })
}

func conformCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func conformCreate(t *testing.T, s sessionstore.ObjectStore) {
	ctx := conformCtx(t)
	require.NoError(t, s.Create(ctx, "sessions/a/lease", []byte("first")))
	err := s.Create(ctx, "sessions/a/lease", []byte("second"))
	require.Error(t, err)
	assert.ErrorIs(t, err, sessionstore.ErrObjectExists)
	assert.Contains(t, err.Error(), "sessions/a/lease", "the error names the key")
	got, err := s.Get(ctx, "sessions/a/lease", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "first", string(got), "a refused Create leaves the object as it was")

	// Another key is free, and so is the key once deleted.
	assert.NoError(t, s.Create(ctx, "sessions/a/lease2", nil))
	require.NoError(t, s.Delete(ctx, "sessions/a/lease"))
	assert.NoError(t, s.Create(ctx, "sessions/a/lease", []byte("third")))
	got, err = s.Get(ctx, "sessions/a/lease", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "third", string(got))
}

func conformGet(t *testing.T, s sessionstore.ObjectStore) {
	ctx := conformCtx(t)
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, s.Put(ctx, "sessions/b/chunk", data))
	for _, tc := range []struct {
		offset, length int64
		want           []byte
	}{
		{0, -1, data},
		{0, int64(len(data)), data},
		{0, 10, data[:10]},
		{5, 10, data[5:15]},
		{99_990, -1, data[99_990:]},
		{99_990, 100, data[99_990:]}, // the object ends first
		{1234, -7, data[1234:]},      // any negative length reads to the end
		{50_000, 0, []byte{}},
		{100_000, -1, []byte{}}, // at the end
		{100_000, 10, []byte{}},
		{200_000, -1, []byte{}}, // past it
	} {
		got, err := s.Get(ctx, "sessions/b/chunk", tc.offset, tc.length)
		if assert.NoError(t, err, "offset %d length %d", tc.offset, tc.length) {
			assert.True(t, bytes.Equal(tc.want, got), "offset %d length %d: %d bytes, want %d", tc.offset, tc.length, len(got), len(tc.want))
			assert.NotNil(t, got, "offset %d length %d", tc.offset, tc.length)
		}
	}
	_, err := s.Get(ctx, "sessions/b/chunk", -1, 10)
	assert.Error(t, err, "a negative offset")

	require.NoError(t, s.Put(ctx, "sessions/b/empty", nil))
	got, err := s.Get(ctx, "sessions/b/empty", 0, -1)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = s.Get(ctx, "sessions/b/empty", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func conformAbsent(t *testing.T, s sessionstore.ObjectStore) {
	ctx := conformCtx(t)
	require.NoError(t, s.Put(ctx, "sessions/c/there", []byte("x")))
	for _, length := range []int64{-1, 0, 5} {
		_, err := s.Get(ctx, "sessions/c/absent", 0, length)
		assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound, "length %d", length)
		if err != nil {
			assert.Contains(t, err.Error(), "sessions/c/absent")
		}
	}
	_, err := s.Get(ctx, "sessions/c/absent", 3, 5)
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound, "a ranged Get")
	_, err = s.Stat(ctx, "sessions/c/absent")
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound)
	if err != nil {
		assert.Contains(t, err.Error(), "sessions/c/absent")
	}
	assert.NoError(t, s.Delete(ctx, "sessions/c/absent"), "Delete of an absent key")
	list, err := s.List(ctx, "sessions/c/absent", 0)
	require.NoError(t, err)
	assert.Empty(t, list)

	require.NoError(t, s.Delete(ctx, "sessions/c/there"))
	_, err = s.Stat(ctx, "sessions/c/there")
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound, "Stat after Delete")
	_, err = s.Get(ctx, "sessions/c/there", 0, -1)
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound, "Get after Delete")
	assert.NoError(t, s.Delete(ctx, "sessions/c/there"), "a second Delete")
}

func conformPut(t *testing.T, s sessionstore.ObjectStore) {
	ctx := conformCtx(t)
	require.NoError(t, s.Put(ctx, "meta/head", []byte("a longer first value")))
	require.NoError(t, s.Put(ctx, "meta/head", []byte("short")))
	got, err := s.Get(ctx, "meta/head", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "short", string(got))
	info, err := s.Stat(ctx, "meta/head")
	require.NoError(t, err)
	assert.EqualValues(t, 5, info.Size)
	assert.Equal(t, "meta/head", info.Key)

	// Put replaces what Create made, and Create still refuses the key.
	require.NoError(t, s.Create(ctx, "meta/lease", []byte("one")))
	require.NoError(t, s.Put(ctx, "meta/lease", []byte("two")))
	got, err = s.Get(ctx, "meta/lease", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "two", string(got))
	assert.ErrorIs(t, s.Create(ctx, "meta/lease", []byte("three")), sessionstore.ErrObjectExists)
}

// conformList: List gives the objects under a prefix, in key order (byte
// order), with their sizes and the object store's modification times,
// which Stat gives too.
func conformList(t *testing.T, s sessionstore.ObjectStore, clockStep time.Duration) {
	ctx := conformCtx(t)
	keys := []string{ // written out of order
		"sessions/s2/chunk-0002", "sessions/s1/lease", "sessions/s10/lease",
		"sessions/s1/chunk-0010", "sessions/s1/chunk-0002", "sessions/s1-x",
		"meta/catalogue", "sessions/s1/a/b/c", "sessionsX",
	}
	before := time.Now().Add(-clockStep)
	for i, k := range keys {
		require.NoError(t, s.Put(ctx, k, bytes.Repeat([]byte{'x'}, i*10)))
	}
	after := time.Now().Add(clockStep)
	size := func(k string) int64 {
		for i, kk := range keys {
			if kk == k {
				return int64(i * 10)
			}
		}
		t.Fatalf("no key %s", k)
		return 0
	}

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"sessions/s1/", []string{"sessions/s1/a/b/c", "sessions/s1/chunk-0002", "sessions/s1/chunk-0010", "sessions/s1/lease"}},
		{"sessions/s1", []string{"sessions/s1-x", "sessions/s1/a/b/c", "sessions/s1/chunk-0002", "sessions/s1/chunk-0010", "sessions/s1/lease", "sessions/s10/lease"}},
		{"sessions/", []string{"sessions/s1-x", "sessions/s1/a/b/c", "sessions/s1/chunk-0002", "sessions/s1/chunk-0010", "sessions/s1/lease", "sessions/s10/lease", "sessions/s2/chunk-0002"}},
		{"", []string{"meta/catalogue", "sessions/s1-x", "sessions/s1/a/b/c", "sessions/s1/chunk-0002", "sessions/s1/chunk-0010", "sessions/s1/lease", "sessions/s10/lease", "sessions/s2/chunk-0002", "sessionsX"}},
		{"sessions/s3/", nil},
	} {
		list, err := s.List(ctx, tc.prefix, 0)
		require.NoError(t, err, "prefix %q", tc.prefix)
		var got []string
		for _, o := range list {
			got = append(got, o.Key)
			assert.Equal(t, size(o.Key), o.Size, "size of %s", o.Key)
			assert.False(t, o.ModTime.Before(before) || o.ModTime.After(after), "ModTime of %s: %v, not within [%v, %v]", o.Key, o.ModTime, before, after)
		}
		assert.Equal(t, tc.want, got, "prefix %q", tc.prefix)
	}

	list, err := s.List(ctx, "sessions/s1/", 0)
	require.NoError(t, err)
	for _, o := range list {
		info, err := s.Stat(ctx, o.Key)
		require.NoError(t, err)
		assert.Equal(t, o.Key, info.Key)
		assert.Equal(t, o.Size, info.Size)
		assert.WithinDuration(t, o.ModTime, info.ModTime, clockStep, "Stat's and List's ModTime of %s", o.Key)
	}
}

// conformListPages: a listing longer than a page (S3 lists 1,000 keys a
// page) comes whole and in order.
func conformListPages(t *testing.T, s sessionstore.ObjectStore) {
	ctx := conformCtx(t)
	const n = 1100
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			assert.NoError(t, s.Put(ctx, fmt.Sprintf("p/%05d", i), []byte{byte(i)}))
		})
	}
	wg.Wait()
	require.NoError(t, s.Put(ctx, "q/outside", nil))
	list, err := s.List(ctx, "p/", 0)
	require.NoError(t, err)
	require.Len(t, list, n)
	for i, o := range list {
		assert.Equal(t, fmt.Sprintf("p/%05d", i), o.Key)
	}
	// A limit gives the first keys, in order, within one page and
	// across the page's edge.
	for _, limit := range []int{1, 32, 1000} {
		first, err := s.List(ctx, "p/", limit)
		require.NoError(t, err)
		require.Len(t, first, limit)
		for i, o := range first {
			assert.Equal(t, fmt.Sprintf("p/%05d", i), o.Key, "limit %d", limit)
		}
	}
}

// conformConcurrentCreate: of 32 Creates of one key at once, exactly one
// succeeds, the others return ErrObjectExists, and the object holds the
// winner's data; 20 rounds, a new key each.
func conformConcurrentCreate(t *testing.T, s sessionstore.ObjectStore) {
	const writers, rounds = 32, 20
	ctx := conformCtx(t)
	for round := range rounds {
		key := fmt.Sprintf("sessions/race/%02d/lease", round)
		errs := make([]error, writers)
		var start, wg sync.WaitGroup
		start.Add(1)
		for w := range writers {
			wg.Go(func() {
				start.Wait()
				errs[w] = s.Create(ctx, key, writerData(round, w))
			})
		}
		start.Done()
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil:
				assert.Equal(t, -1, winner, "round %d: writers %d and %d both created %s", round, winner, w, key)
				winner = w
			default:
				assert.ErrorIs(t, err, sessionstore.ErrObjectExists, "round %d, writer %d", round, w)
			}
		}
		require.NotEqual(t, -1, winner, "round %d: no Create of %s succeeded", round, key)
		got, err := s.Get(ctx, key, 0, -1)
		require.NoError(t, err)
		assert.Equal(t, string(writerData(round, winner)), string(got), "round %d: the object holds the winner's data", round)
	}
}

// writerData is what writer w of a round creates: different for each, and
// long enough that a mix of two would show.
func writerData(round, w int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "round %02d writer %02d;", round, w), 200)
}

// conformListAfter: a binding that lists from a key on does so in order,
// with the prefix kept and the key itself left out; one that cannot says
// so with errors.ErrUnsupported, returning nothing.
func conformListAfter(t *testing.T, s sessionstore.ObjectStore, supported bool) {
	ctx := conformCtx(t)
	la, ok := s.(sessionstore.ObjectListerAfter)
	if !ok {
		require.False(t, supported, "the binding is no ObjectListerAfter")
		return
	}
	for i := range 20 {
		require.NoError(t, s.Put(ctx, fmt.Sprintf("a/%03d", i), nil))
	}
	require.NoError(t, s.Put(ctx, "b/000", nil))
	require.NoError(t, s.Put(ctx, "0/000", nil))
	got, err := la.ListAfter(ctx, "a/", "a/007", 5)
	if !supported {
		assert.ErrorIs(t, err, errors.ErrUnsupported)
		assert.Empty(t, got)
		return
	}
	require.NoError(t, err)
	var keys []string
	for _, o := range got {
		keys = append(keys, o.Key)
	}
	assert.Equal(t, []string{"a/008", "a/009", "a/010", "a/011", "a/012"}, keys)
	got, err = la.ListAfter(ctx, "a/", "a/018", 5)
	require.NoError(t, err)
	require.Len(t, got, 1, "the prefix ends the listing")
	assert.Equal(t, "a/019", got[0].Key)
	got, err = la.ListAfter(ctx, "a/", "a/", 3)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, "a/000", got[0].Key)
	got, err = la.ListAfter(ctx, "a/", "", 2)
	require.NoError(t, err)
	require.Len(t, got, 2, "a key before the prefix lists from the prefix")
	assert.Equal(t, "a/000", got[0].Key)
}
