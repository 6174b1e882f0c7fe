package remote_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// versionsOf lists every version and delete marker of the keys under
// prefix in bucket: key -> how many.
func versionsOf(t *testing.T, srv *s3test.Server, bucket, prefix string) map[string]int {
	t.Helper()
	out, err := srv.Client().ListObjectVersions(context.Background(), &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	require.NoError(t, err)
	require.False(t, aws.ToBool(out.IsTruncated))
	n := map[string]int{}
	for _, v := range out.Versions {
		n[aws.ToString(v.Key)]++
	}
	for _, m := range out.DeleteMarkers {
		n[aws.ToString(m.Key)]++
	}
	return n
}

// TestS3DeleteAllVersions: on a versioned bucket of a real S3 server, a
// store NewS3 returns removes every version and delete marker of a key,
// and nothing of a key it is a prefix of; New's Delete leaves the older
// versions, which is why a Store needs it.
func TestS3DeleteAllVersions(t *testing.T) {
	ctx := context.Background()
	srv := s3test.StartVersioned(t)
	bucket := srv.NewBucket(t)
	srv.EnableVersioning(t, bucket)
	cfg := srv.Config(bucket)
	st := remote.NewS3(srv.Open(t, cfg), cfg)
	vd, ok := st.(sessionstore.ObjectVersionDeleter)
	require.True(t, ok)

	require.NoError(t, st.Put(ctx, "keys/a.json", []byte("one")))
	require.NoError(t, st.Put(ctx, "keys/a.json", []byte("two")))
	require.NoError(t, st.Put(ctx, "keys/a.jsonx", []byte("other")))
	require.NoError(t, st.Delete(ctx, "keys/a.json"))
	before := versionsOf(t, srv, bucket, "keys/")
	require.Equal(t, 3, before["keys/a.json"], "two versions and a delete marker: a Delete alone leaves them")

	require.NoError(t, vd.DeleteAllVersions(ctx, "keys/a.json"))
	after := versionsOf(t, srv, bucket, "keys/")
	assert.Zero(t, after["keys/a.json"], "no version left")
	assert.Equal(t, 1, after["keys/a.jsonx"], "another key untouched")
	require.NoError(t, vd.DeleteAllVersions(ctx, "keys/none.json"), "an absent key")

	// A bucket without versioning: the object goes.
	plain := srv.NewBucket(t)
	pcfg := srv.Config(plain)
	ps := remote.NewS3(srv.Open(t, pcfg), pcfg)
	require.NoError(t, ps.Put(ctx, "k", []byte("x")))
	require.NoError(t, ps.(sessionstore.ObjectVersionDeleter).DeleteAllVersions(ctx, "k"))
	_, err := ps.Get(ctx, "k", 0, -1)
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound)
}

// TestS3EncryptedDeleteLeavesNoKeyVersion: an encrypted session on a
// versioned bucket, deleted by a Store on NewS3's store: no version of its
// key record stays, while older versions of its other objects do; and no
// object version holds its record in clear.
func TestS3EncryptedDeleteLeavesNoKeyVersion(t *testing.T) {
	ctx := context.Background()
	srv := s3test.StartVersioned(t)
	bucket := srv.NewBucket(t)
	srv.EnableVersioning(t, bucket)
	cfg := srv.Config(bucket)
	st := remote.NewS3(srv.Open(t, cfg), cfg)
	keys, err := sessionstore.NewLocalKeys("local:1", map[string][]byte{"local:1": bytes.Repeat([]byte{7}, 32)})
	require.NoError(t, err)
	s, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: st, Keys: keys})
	require.NoError(t, err)
	m, err := s.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	const secret = "SECRET-do-not-store-in-clear"
	_, err = s.Append(ctx, m.ID, sessionstore.UserText(secret))
	require.NoError(t, err)
	keyKey := "keys/" + m.ID.String() + ".json"
	require.Equal(t, 1, versionsOf(t, srv, bucket, "keys/")[keyKey])

	out, err := srv.Client().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	for _, v := range out.Versions {
		got, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: v.Key, VersionId: v.VersionId})
		require.NoError(t, err)
		var b bytes.Buffer
		_, err = b.ReadFrom(got.Body)
		got.Body.Close()
		require.NoError(t, err)
		assert.NotContains(t, b.String(), secret, "object %s", aws.ToString(v.Key))
	}

	require.NoError(t, s.Delete(ctx, m.ID))
	require.NoError(t, s.Close())
	assert.Zero(t, versionsOf(t, srv, bucket, "keys/")[keyKey], "no version of the key record")
	assert.NotEmpty(t, versionsOf(t, srv, bucket, "sessions/"+m.ID.String()+"/"), "older versions of its data stay, unreadable")
}

// TestS3ReplaceIf: on a real S3 server, a store NewS3 returns replaces an
// object only while it is the version GetTagged read: a tag of an older
// version, and an object removed since, fail with ErrObjectChanged and
// store nothing.
func TestS3ReplaceIf(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	cfg := srv.Config(bucket)
	st := remote.NewS3(srv.Open(t, cfg), cfg)
	rp, ok := st.(sessionstore.ObjectReplacer)
	require.True(t, ok)

	_, _, err := rp.GetTagged(ctx, "keys/a.json")
	require.ErrorIs(t, err, sessionstore.ErrObjectNotFound)
	require.NoError(t, st.Put(ctx, "keys/a.json", []byte("one")))
	b, tag, err := rp.GetTagged(ctx, "keys/a.json")
	require.NoError(t, err)
	assert.Equal(t, "one", string(b))
	require.NotEmpty(t, tag)
	require.NoError(t, rp.ReplaceIf(ctx, "keys/a.json", []byte("two"), tag))
	got, err := st.Get(ctx, "keys/a.json", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "two", string(got))

	err = rp.ReplaceIf(ctx, "keys/a.json", []byte("three"), tag)
	assert.ErrorIs(t, err, sessionstore.ErrObjectChanged, "the tag of the version replaced")
	_, tag, err = rp.GetTagged(ctx, "keys/a.json")
	require.NoError(t, err)
	require.NoError(t, st.Delete(ctx, "keys/a.json"))
	err = rp.ReplaceIf(ctx, "keys/a.json", []byte("four"), tag)
	assert.ErrorIs(t, err, sessionstore.ErrObjectChanged, "an object removed since")
	_, err = st.Get(ctx, "keys/a.json", 0, -1)
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound, "nothing brought back")
}

// TestS3EncryptedRewrap: a Store on NewS3's store rewraps an encrypted
// session's key object under a new key-encryption key; a Store that holds
// only the new one reads the session.
func TestS3EncryptedRewrap(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	cfg := srv.Config(bucket)
	st := remote.NewS3(srv.Open(t, cfg), cfg)
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	old, err := sessionstore.NewLocalKeys("kek:a", map[string][]byte{"kek:a": a})
	require.NoError(t, err)
	both, err := sessionstore.NewLocalKeys("kek:b", map[string][]byte{"kek:a": a, "kek:b": b})
	require.NoError(t, err)
	onlyB, err := sessionstore.NewLocalKeys("kek:b", map[string][]byte{"kek:b": b})
	require.NoError(t, err)

	s, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: st, Keys: old})
	require.NoError(t, err)
	m, err := s.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	ev, err := s.Append(ctx, m.ID, sessionstore.UserText("before the rewrap"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: st, Keys: both})
	require.NoError(t, err)
	rep, err := s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, sessionstore.RewrapReport{Rewrapped: 1}, rep)
	require.NoError(t, s.Close())

	s, err = sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: st, Keys: onlyB})
	require.NoError(t, err)
	got, err := s.Event(ctx, m.ID, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, string(ev.Record), string(got.Record))
	require.NoError(t, s.Close())
}
