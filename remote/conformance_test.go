package remote_test

import (
	"context"
	"fmt"
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
	"github.com/sessionstore/sessionstore/sessiontest"
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

// TestConformance runs the ObjectStore contract (sessiontest) against
// each backend: only S3 lists from a key on.
func TestConformance(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			sessiontest.ObjectStoreConformance(t, be.open, sessiontest.ObjectStoreConfig{
				ClockStep: be.clockStep,
				ListAfter: be.name == "versitygw",
			})
		})
	}
}

// TestErrorsNameTheBinding: the binding's errors start with "remote:".
func TestErrorsNameTheBinding(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
		require.NoError(t, s.Create(ctx, "sessions/a/lease", []byte("first")))
		err := s.Create(ctx, "sessions/a/lease", []byte("second"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "remote: create sessions/a/lease:")
		_, err = s.Stat(ctx, "sessions/c/absent")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "remote: stat sessions/c/absent:")
	})
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
