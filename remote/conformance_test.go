package remote_test

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
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// backend opens a new, empty store of one kind for a test.
type backend struct {
	name string
	open func(t *testing.T) sessionstore.ObjectStore
	// clockStep is how far the backend's modification times may be from
	// this process's clock.
	clockStep time.Duration
}

var backends = []backend{
	{"memblob", func(t *testing.T) sessionstore.ObjectStore {
		b := memblob.OpenBucket(nil)
		t.Cleanup(func() { _ = b.Close() })
		return remote.New(b)
	}, time.Nanosecond},
	{"fileblob", func(t *testing.T) sessionstore.ObjectStore {
		b, err := fileblob.OpenBucket(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return remote.New(b)
	}, 10 * time.Millisecond}, // the kernel stamps files with a clock a tick behind
	{"versitygw", func(t *testing.T) sessionstore.ObjectStore {
		return s3test.Shared(t).Store(t)
	}, time.Second}, // S3's Last-Modified is in seconds
}

func forEachBackend(t *testing.T, test func(t *testing.T, s sessionstore.ObjectStore, be backend)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			test(t, be.open(t), be)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestCreateIsCreateOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
		require.NoError(t, s.Create(ctx, "sessions/a/lease", []byte("first")))
		err := s.Create(ctx, "sessions/a/lease", []byte("second"))
		require.Error(t, err)
		assert.ErrorIs(t, err, sessionstore.ErrObjectExists)
		assert.Contains(t, err.Error(), "remote: create sessions/a/lease:")
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
	})
}

func TestGet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
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
	})
}

func TestAbsent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
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
			assert.Contains(t, err.Error(), "remote: stat sessions/c/absent:")
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
	})
}

func TestPutReplaces(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
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
	})
}

// TestListAndStat: List gives the objects under a prefix, in key order,
// with their sizes and the object store's modification times, which Stat
// gives too.
func TestListAndStat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, be backend) {
		ctx := ctxFor(t)
		keys := []string{ // written out of order
			"sessions/s2/chunk-0002", "sessions/s1/lease", "sessions/s10/lease",
			"sessions/s1/chunk-0010", "sessions/s1/chunk-0002", "sessions/s1-x",
			"meta/catalogue", "sessions/s1/a/b/c", "sessionsX",
		}
		before := time.Now().Add(-be.clockStep)
		for i, k := range keys {
			require.NoError(t, s.Put(ctx, k, bytes.Repeat([]byte{'x'}, i*10)))
		}
		after := time.Now().Add(be.clockStep)
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
			assert.WithinDuration(t, o.ModTime, info.ModTime, be.clockStep, "Stat's and List's ModTime of %s", o.Key)
		}
	})
}

// TestListPages: a listing longer than a page (S3 lists 1,000 keys a
// page) comes whole and in order.
func TestListPages(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1,100 objects")
	}
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
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
	})
}

// TestConcurrentCreate: of 32 Creates of one key at once, exactly one
// succeeds, the others return ErrObjectExists, and the object holds the
// winner's data; 20 rounds, a new key each.
func TestConcurrentCreate(t *testing.T) {
	const writers, rounds = 32, 20
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
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
	})
}

// writerData is what writer w of a round creates: different for each, and
// long enough that a mix of two would show.
func writerData(round, w int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "round %02d writer %02d;", round, w), 200)
}

// TestOpenURL opens mem:// and file:// URLs, with and without a prefix.
func TestOpenURL(t *testing.T) {
	ctx := ctxFor(t)
	dir := t.TempDir()
	for _, url := range []string{"mem://", "file://" + dir, "file://" + dir + "?prefix=store/"} {
		s, closer, err := remote.OpenURL(ctx, url)
		require.NoError(t, err, url)
		require.NoError(t, s.Create(ctx, "a/b", []byte(url)), url)
		assert.ErrorIs(t, s.Create(ctx, "a/b", nil), sessionstore.ErrObjectExists, url)
		list, err := s.List(ctx, "", 0)
		require.NoError(t, err, url)
		if assert.Len(t, list, 1, url) {
			assert.Equal(t, "a/b", list[0].Key, url)
		}
		assert.NoError(t, closer.Close(), url)
	}
	// The prefixed store's object is under store/ in the directory.
	b, err := fileblob.OpenBucket(dir, nil)
	require.NoError(t, err)
	defer b.Close()
	data, err := b.ReadAll(ctx, "store/a/b")
	require.NoError(t, err)
	assert.Equal(t, "file://"+dir+"?prefix=store/", string(data))

	_, _, err = remote.OpenURL(ctx, "nosuchscheme://x")
	assert.Error(t, err)
}

// TestOpenURLS3 opens the S3 server by an s3:// URL, credentials from the
// environment as for AWS.
func TestOpenURLS3(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	ctx := ctxFor(t)
	url := fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=%s&prefix=pre/", bucket, srv.Endpoint, srv.Region)
	s, closer, err := remote.OpenURL(ctx, url)
	require.NoError(t, err)
	defer closer.Close()
	require.NoError(t, s.Create(ctx, "k", []byte("v")))
	assert.ErrorIs(t, s.Create(ctx, "k", []byte("w")), sessionstore.ErrObjectExists)
	got, err := s.Get(ctx, "k", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "v", string(got))

	direct := remote.New(srv.Open(t, srv.Config(bucket)))
	list, err := direct.List(ctx, "", 0)
	require.NoError(t, err)
	if assert.Len(t, list, 1) {
		assert.Equal(t, "pre/k", list[0].Key)
	}
}

// TestOpenS3Prefix keeps two stores apart in one bucket by prefix.
func TestOpenS3Prefix(t *testing.T) {
	srv := s3test.Shared(t)
	ctx := ctxFor(t)
	cfg := srv.Config(srv.NewBucket(t))
	cfg.Prefix = "one/"
	one := remote.New(srv.Open(t, cfg))
	cfg.Prefix = "two/"
	two := remote.New(srv.Open(t, cfg))
	require.NoError(t, one.Create(ctx, "lease", []byte("1")))
	require.NoError(t, two.Create(ctx, "lease", []byte("2")), "the other prefix's key is free")
	list, err := one.List(ctx, "", 0)
	require.NoError(t, err)
	if assert.Len(t, list, 1) {
		assert.Equal(t, "lease", list[0].Key)
	}
	got, err := two.Get(ctx, "lease", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "2", string(got))
}

func TestOpenS3NeedsBucket(t *testing.T) {
	_, err := remote.OpenS3(context.Background(), remote.S3Config{Endpoint: "http://127.0.0.1:1"})
	assert.Error(t, err)
}

// TestNewKeepsBucket: the store uses the bucket it is given, which the
// caller closes.
func TestNewKeepsBucket(t *testing.T) {
	ctx := ctxFor(t)
	b := memblob.OpenBucket(nil)
	defer b.Close()
	s := remote.New(b)
	require.NoError(t, s.Put(ctx, "k", []byte("v")))
	data, err := b.ReadAll(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", string(data))
	require.NoError(t, b.WriteAll(ctx, "k2", []byte("w"), &blob.WriterOptions{}))
	got, err := s.Get(ctx, "k2", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "w", string(got))
}

// TestOpenURLDrivers: OpenURL knows each scheme the package doc lists.
// It opens each bucket and closes it without a call to it: the settings
// keep the clients to an unused loopback port and from any credentials
// lookup over the network.
func TestOpenURLDrivers(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "account")
	t.Setenv("AZURE_STORAGE_KEY", "c2Vzc2lvbnN0b3JlIHRlc3Qga2V5")
	ctx := ctxFor(t)
	for _, url := range []string{
		"s3://bucket?region=us-east-1&endpoint=http://127.0.0.1:1&use_path_style=true",
		"s3://bucket?endpoint=http://127.0.0.1:1&request_checksum_calculation=when_supported",
		"s3://bucket",
		"gs://bucket",
		"azblob://container?localemu=true&domain=127.0.0.1:1&protocol=http",
		"mem://",
		"file://" + t.TempDir(),
	} {
		s, closer, err := remote.OpenURL(ctx, url)
		if assert.NoError(t, err, url) {
			assert.NotNil(t, s, url)
			assert.NoError(t, closer.Close(), url)
		}
	}
	_, _, err := remote.OpenURL(ctx, "s3://bucket?no_such_parameter=1")
	assert.Error(t, err, "an unknown parameter")
}

// TestListAfter: S3 (versitygw) lists from a key on, in order, with the
// prefix kept and the key itself left out; drivers that cannot (memblob,
// fileblob) say so with errors.ErrUnsupported, returning nothing.
func TestListAfter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, be backend) {
		ctx := ctxFor(t)
		la, ok := s.(sessionstore.ObjectListerAfter)
		require.True(t, ok, "the binding is an ObjectListerAfter")
		for i := range 20 {
			require.NoError(t, s.Put(ctx, fmt.Sprintf("a/%03d", i), nil))
		}
		require.NoError(t, s.Put(ctx, "b/000", nil))
		got, err := la.ListAfter(ctx, "a/", "a/007", 5)
		if be.name != "versitygw" {
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
	})
}

// TestListPageOnS3: a Store on versitygw pages through its sessions
// newest first, every one once, its pages read from a key on (ListAfter).
func TestListPageOnS3(t *testing.T) {
	ctx := ctxFor(t)
	obj := s3test.Shared(t).Store(t)
	s, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: obj})
	require.NoError(t, err)
	defer s.Close()
	var want []string
	for i := range 30 {
		m, err := s.Create(ctx, sessionstore.Meta{Name: fmt.Sprint("s", i)})
		require.NoError(t, err)
		want = append([]string{m.ID.String()}, want...)
	}
	var got []string
	cursor := ""
	for {
		page, next, err := s.ListPage(ctx, sessionstore.Query{Limit: 4}, cursor)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 4)
		for _, m := range page {
			got = append(got, m.ID.String())
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, want, got)
}
