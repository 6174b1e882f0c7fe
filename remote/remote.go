// Package remote binds sessionstore.ObjectStore to object storage through
// gocloud.dev/blob: Amazon S3 and S3-compatible servers, Google Cloud
// Storage, Azure Blob Storage, a local directory (fileblob) and memory
// (memblob).
//
// Open a store with New (a *blob.Bucket the caller opened), OpenURL (a
// gocloud URL: s3://, gs://, azblob://, file://, mem://) or OpenS3 (an
// S3-compatible endpoint with static credentials).
//
// # What each call guarantees
//
// Every call returns only after the object store answered it. A Create or
// Put that returns nil has stored the whole object as the object store
// stores it: on S3, GCS and Azure that is durable (the services acknowledge
// a write only once it is stored redundantly); fileblob renames a complete
// file into place without syncing it, so a crash of the machine can lose
// it; memblob keeps objects in memory only. A call that returns an error
// may or may not have been applied: a write whose answer was lost in the
// network has been applied without its caller hearing of it.
//
// Create is create-only: of any number of concurrent Creates of one key,
// exactly one succeeds and the others return an error matching
// sessionstore.ErrObjectExists, and the object then holds the winner's
// data. The drivers hold to that as follows:
//
//   - S3 and S3-compatible servers: a PutObject with If-None-Match: *,
//     which the server decides (Amazon S3 since August 2024; an
//     S3-compatible server must support conditional writes, which some
//     older ones ignore, silently replacing the object).
//   - GCS: a write with the DoesNotExist precondition (ifGenerationMatch=0),
//     decided by the service.
//   - Azure: a write with If-None-Match: *, decided by the service.
//   - memblob: under the bucket's lock, so across the users of one bucket
//     in one process.
//   - fileblob: under a lock of the process, so only among the Creates of
//     one process; Creates from two processes on one directory can both
//     succeed, and a Put racing a Create of the same key can be lost.
//
// One case turns a won Create into ErrObjectExists: the S3 client retries
// a request whose answer it did not get, so when the server stored the
// object but the answer was lost, the retry finds the object and the
// Create returns ErrObjectExists although its data is what is stored. No
// Create ever returns nil for an object it did not store. A caller that
// must tell the two apart creates data unique to it and, on
// ErrObjectExists, reads the object back, as sessionstore does: its log
// objects name the lease that wrote them, and an existing object holding
// exactly the bytes it created is its own. With the client's retries off
// (S3Config.MaxAttempts 1) such a Create returns an error that matches
// neither sentinel.
//
// Errors name the call and the key ("remote: get sessions/a: ..."). Get
// and Stat of an absent key return an error matching
// sessionstore.ErrObjectNotFound; Delete of an absent key returns nil.
package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	// The drivers OpenURL opens: s3://, gs://, azblob://, file://, mem://.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"

	"github.com/sessionstore/sessionstore"
)

// store is a sessionstore.ObjectStore kept in a gocloud bucket.
type store struct {
	b *blob.Bucket
}

// New returns the store kept in b. The caller keeps b, and closes it once
// the store is no longer used.
func New(b *blob.Bucket) sessionstore.ObjectStore {
	return &store{b: b}
}

// NewS3 is New for a bucket OpenS3 opened with cfg. Its store also
// removes every version of an object (sessionstore.ObjectVersionDeleter),
// with the S3 API gocloud.dev/blob has no call for: a Store deletes so an
// encrypted session's key record, so that on a versioned bucket no older
// version of the key stays to open the session's older object versions
// with; and it replaces an object only if unchanged
// (sessionstore.ObjectReplacer: GetTagged and ReplaceIf, S3's ETag and
// If-Match), which Rewrap needs to rewrap key objects. On a bucket
// without versioning it is New plus these calls.
func NewS3(b *blob.Bucket, cfg S3Config) sessionstore.ObjectStore {
	return &s3Store{store: store{b: b}, client: NewS3Client(cfg), bucket: cfg.Bucket, prefix: cfg.Prefix}
}

type s3Store struct {
	store
	client *s3.Client
	bucket string
	prefix string
}

// DeleteAllVersions removes every version of key's object and every
// delete marker of it: each one the bucket lists for the key, removed by
// its version id. An absent object is not an error.
func (s *s3Store) DeleteAllVersions(ctx context.Context, key string) error {
	full := s.prefix + key
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(full)}
	for {
		out, err := s.client.ListObjectVersions(ctx, in)
		if err != nil {
			return fmt.Errorf("remote: list versions of %s: %w", key, err)
		}
		var ids []*string
		for _, v := range out.Versions {
			if aws.ToString(v.Key) == full {
				ids = append(ids, v.VersionId)
			}
		}
		for _, m := range out.DeleteMarkers {
			if aws.ToString(m.Key) == full {
				ids = append(ids, m.VersionId)
			}
		}
		for _, id := range ids {
			if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(full), VersionId: id}); err != nil {
				return fmt.Errorf("remote: delete version %s of %s: %w", aws.ToString(id), key, err)
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	// The current object, where the listing named none (a bucket that
	// never had versioning lists it with the version id "null").
	return s.store.Delete(ctx, key)
}

// GetTagged returns key's whole object and its ETag, the tag ReplaceIf
// takes (sessionstore.ObjectReplacer). An absent key returns an error
// matching sessionstore.ErrObjectNotFound.
func (s *s3Store) GetTagged(ctx context.Context, key string) ([]byte, string, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		if httpStatus(err) == http.StatusNotFound {
			return nil, "", fmt.Errorf("remote: get %s: %w: %w", key, sessionstore.ErrObjectNotFound, err)
		}
		return nil, "", fmt.Errorf("remote: get %s: %w", key, err)
	}
	defer out.Body.Close()
	data, err := readAll(out.Body, make([]byte, 0, max(0, aws.ToInt64(out.ContentLength))))
	if err != nil {
		return nil, "", fmt.Errorf("remote: get %s: %w", key, err)
	}
	if n := aws.ToInt64(out.ContentLength); n >= 0 && int64(len(data)) != n {
		return nil, "", fmt.Errorf("remote: get %s: read %d bytes of %d: %w", key, len(data), n, io.ErrUnexpectedEOF)
	}
	return data, aws.ToString(out.ETag), nil
}

// ReplaceIf stores data under key if the object there is still the one
// whose ETag is tag (S3's If-Match on PutObject), else returns an error
// matching sessionstore.ErrObjectChanged: S3's 412 (another object), 404
// (none any more) and 409 (a concurrent conditional write came first)
// (sessionstore.ObjectReplacer).
func (s *s3Store) ReplaceIf(ctx context.Context, key string, data []byte, tag string) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))), IfMatch: aws.String(tag)})
	switch {
	case err == nil:
		return nil
	case httpStatus(err) == http.StatusPreconditionFailed, httpStatus(err) == http.StatusNotFound, isConditionalConflict(err):
		return fmt.Errorf("remote: replace %s: %w: %w", key, sessionstore.ErrObjectChanged, err)
	default:
		return fmt.Errorf("remote: replace %s: %w", key, err)
	}
}

// httpStatus is the HTTP status of an S3 error, 0 for another error.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// OpenURL opens the bucket a gocloud URL names and returns the store kept
// in it, with the bucket's Close. The forms:
//
//	s3://BUCKET?region=REGION
//	s3://BUCKET?endpoint=http://HOST:PORT&use_path_style=true&region=REGION
//	gs://BUCKET
//	azblob://CONTAINER
//	file:///PATH/TO/DIR
//	mem://
//
// Any of them takes prefix=DIR/ to keep the store under a key prefix.
// Credentials come from each service's usual places (for S3 the AWS
// environment variables and shared config files, for GCS the application
// default credentials, for Azure the AZURE_STORAGE_* variables). For s3://
// URLs OpenURL asks for request checksums only where the S3 API requires
// them (request_checksum_calculation=when_required, and the same for
// response_checksum_validation) unless the URL sets them: S3-compatible
// servers may refuse the checksums the AWS SDK sends by default.
func OpenURL(ctx context.Context, url string) (sessionstore.ObjectStore, io.Closer, error) {
	if rest, ok := strings.CutPrefix(url, s3blob.Scheme+"://"); ok {
		url = s3blob.Scheme + "://" + withDefaultChecksums(rest)
	}
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("remote: open %s: %w", url, err)
	}
	return New(b), b, nil
}

// withDefaultChecksums adds the "when_required" checksum settings to the
// part of an s3:// URL after the scheme, unless it sets them.
func withDefaultChecksums(rest string) string {
	base, query, _ := strings.Cut(rest, "?")
	params := []string{query}
	for _, name := range []string{"request_checksum_calculation", "response_checksum_validation"} {
		if !hasParam(query, name) {
			params = append(params, name+"=when_required")
		}
	}
	if query == "" {
		params = params[1:]
	}
	return base + "?" + strings.Join(params, "&")
}

func hasParam(query, name string) bool {
	for p := range strings.SplitSeq(query, "&") {
		if k, _, _ := strings.Cut(p, "="); k == name {
			return true
		}
	}
	return false
}

// S3Config names a bucket of an S3-compatible server (or of Amazon S3)
// and the static credentials to reach it with.
type S3Config struct {
	// Endpoint is the server's base URL, such as http://127.0.0.1:7070.
	// Empty means Amazon S3's endpoint for Region.
	Endpoint string
	// Region is the region requests are signed for; empty means us-east-1.
	Region string
	// Bucket is the bucket's name.
	Bucket string
	// AccessKey and SecretKey are the credentials.
	AccessKey string
	SecretKey string
	// Prefix, if set, keeps the store under this key prefix (usually
	// ending in "/"): its keys are the bucket's keys without it.
	Prefix string
	// VirtualHosted addresses the bucket as a host name
	// (BUCKET.HOST/KEY) instead of in the path (HOST/BUCKET/KEY), which
	// is what OpenS3 does otherwise.
	VirtualHosted bool
	// MaxAttempts is how many times the client sends a request that failed
	// in a way worth retrying (a 5xx answer, a lost connection); 0 means
	// the AWS SDK's default (3), 1 means no retry.
	MaxAttempts int
	// HTTPClient sends the requests; nil means the AWS SDK's default.
	HTTPClient *http.Client
}

// OpenS3 opens the bucket cfg names, with path-style addressing (unless
// cfg.VirtualHosted) and the request checksums that the S3 API requires and
// no others, which is what S3-compatible servers expect. The caller closes
// the bucket; New(b) is its store.
func OpenS3(ctx context.Context, cfg S3Config) (*blob.Bucket, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("remote: OpenS3: no bucket")
	}
	client := NewS3Client(cfg)
	b, err := s3blob.OpenBucketV2(ctx, client, cfg.Bucket, &s3blob.Options{
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
	if err != nil {
		return nil, fmt.Errorf("remote: open s3 bucket %s: %w", cfg.Bucket, err)
	}
	if cfg.Prefix != "" {
		b = blob.PrefixedBucket(b, cfg.Prefix)
	}
	return b, nil
}

// NewS3Client returns the S3 client OpenS3 uses for cfg (cfg.Bucket and
// cfg.Prefix aside), for calls the bucket does not make, such as
// CreateBucket.
func NewS3Client(cfg S3Config) *s3.Client {
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	awsCfg := aws.Config{
		Region:                     region,
		Credentials:                credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           cfg.MaxAttempts,
	}
	if cfg.Endpoint != "" {
		awsCfg.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.HTTPClient != nil {
		awsCfg.HTTPClient = cfg.HTTPClient
	}
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = !cfg.VirtualHosted
	})
}

// Create stores data under key if no object has that key, else returns an
// error matching sessionstore.ErrObjectExists and leaves the object as it
// is. Of concurrent Creates of one key exactly one returns nil, and the
// object holds its data (see the package doc for each driver's part in
// that, and for the one case in which a Create whose data was stored
// returns ErrObjectExists). A nil return means the object store stored
// the whole object. S3's answer that a concurrent conditional write of key
// was in flight (409 ConditionalRequestConflict, which stores nothing) is
// not returned: Create sends the write again, up to 5 times in all.
func (s *store) Create(ctx context.Context, key string, data []byte) error {
	for attempt := 1; ; attempt++ {
		err := s.b.WriteAll(ctx, key, data, &blob.WriterOptions{IfNotExist: true})
		switch {
		case err == nil:
			return nil
		case gcerrors.Code(err) == gcerrors.FailedPrecondition:
			return fmt.Errorf("remote: create %s: %w: %w", key, sessionstore.ErrObjectExists, err)
		case isConditionalConflict(err) && attempt < conflictAttempts:
			// Another conditional write of key was in flight; this one
			// stored nothing, and sent again it succeeds or finds the
			// other's object.
			t := time.NewTimer(time.Duration(attempt) * conflictBackoff)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("remote: create %s: %w (after %w)", key, ctx.Err(), err)
			}
		default:
			return fmt.Errorf("remote: create %s: %w", key, err)
		}
	}
}

// How often and how far apart Create sends a write that S3 refused for a
// concurrent conditional write of the key.
const (
	conflictAttempts = 5
	conflictBackoff  = 20 * time.Millisecond
)

// isConditionalConflict reports whether err is S3's 409
// ConditionalRequestConflict: a conditional write that lost to a
// concurrent one before either was decided, which stored nothing.
func isConditionalConflict(err error) bool {
	var ae interface{ ErrorCode() string }
	return errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict"
}

// Put stores data under key, replacing any object there. A nil return
// means the object store stored the whole object; a reader then sees all
// of data or, before, all of the object it replaced, never a mix.
func (s *store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.b.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("remote: put %s: %w", key, err)
	}
	return nil
}

// Get returns length bytes of key's object from offset, or all of it from
// offset when length is negative; fewer when the object ends first, and
// none when offset is at or past its end. An absent key returns an error
// matching sessionstore.ErrObjectNotFound. The bytes of a Get without error
// are the object's as one answer of the object store gave them: a body cut
// short on the way is an error, never a short result.
func (s *store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if offset < 0 {
		return nil, fmt.Errorf("remote: get %s: negative offset %d", key, offset)
	}
	if length < 0 {
		length = -1
	}
	if length == 0 {
		// Only whether the object exists.
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return []byte{}, nil
	}
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("remote: get %s: %w: %w", key, sessionstore.ErrObjectNotFound, err)
		}
		if isInvalidRange(err) {
			return s.getPastEnd(ctx, key, offset, err)
		}
		return nil, fmt.Errorf("remote: get %s: %w", key, err)
	}
	defer r.Close()
	want := r.Size() - offset
	if want < 0 {
		want = 0
	}
	if length >= 0 && length < want {
		want = length
	}
	data := make([]byte, 0, want)
	data, err = readAll(r, data)
	if err != nil {
		return nil, fmt.Errorf("remote: get %s: %w", key, err)
	}
	if int64(len(data)) != want {
		return nil, fmt.Errorf("remote: get %s: read %d bytes of %d at offset %d: %w", key, len(data), want, offset, io.ErrUnexpectedEOF)
	}
	return data, nil
}

// readAll appends r's bytes to data until r ends.
func readAll(r io.Reader, data []byte) ([]byte, error) {
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, 512)
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// isInvalidRange reports whether err is S3's answer to a range that starts
// at or past the object's end (416, InvalidRange).
func isInvalidRange(err error) bool {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
		return true
	}
	var ae interface{ ErrorCode() string }
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange"
}

// getPastEnd answers a Get whose range the object store refused: none of
// the object's bytes if offset is at or past its end, else rangeErr.
func (s *store) getPastEnd(ctx context.Context, key string, offset int64, rangeErr error) ([]byte, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if offset >= info.Size {
		return []byte{}, nil
	}
	return nil, fmt.Errorf("remote: get %s: %w", key, rangeErr)
}

// Stat returns key's size and the object store's modification time of it
// (its clock, not this machine's), or an error matching
// sessionstore.ErrObjectNotFound.
func (s *store) Stat(ctx context.Context, key string) (sessionstore.ObjectInfo, error) {
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return sessionstore.ObjectInfo{}, fmt.Errorf("remote: stat %s: %w: %w", key, sessionstore.ErrObjectNotFound, err)
		}
		return sessionstore.ObjectInfo{}, fmt.Errorf("remote: stat %s: %w", key, err)
	}
	return sessionstore.ObjectInfo{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

// ListAfter returns the first limit objects whose keys start with prefix
// and sort after after, in key order, with one request: S3's StartAfter,
// GCS's StartOffset (sessionstore.ObjectListerAfter). Other drivers
// (Azure, fileblob, memblob) cannot: errors.ErrUnsupported, and the Store
// lists from the prefix on.
func (s *store) ListAfter(ctx context.Context, prefix, after string, limit int) ([]sessionstore.ObjectInfo, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("remote: list %s after %s: limit %d: %w", prefix, after, limit, errors.ErrUnsupported)
	}
	applied := false
	opts := &blob.ListOptions{Prefix: prefix, BeforeList: func(as func(any) bool) error {
		var v2 *s3.ListObjectsV2Input
		var v1 *s3.ListObjectsInput
		var gq *storage.Query
		switch {
		case as(&v2):
			v2.StartAfter, applied = aws.String(after), true
		case as(&v1):
			v1.Marker, applied = aws.String(after), true
		case as(&gq):
			// StartOffset is inclusive: the least key after after.
			gq.StartOffset, applied = after+"\x00", true
		}
		if !applied {
			return errNoStartAfter
		}
		return nil
	}}
	page, _, err := s.b.ListPage(ctx, blob.FirstPageToken, limit, opts)
	if !applied || errors.Is(err, errNoStartAfter) {
		return nil, fmt.Errorf("remote: list %s after %s: %w", prefix, after, errors.ErrUnsupported)
	}
	if err != nil {
		return nil, fmt.Errorf("remote: list %s after %s: %w", prefix, after, err)
	}
	var out []sessionstore.ObjectInfo
	for _, obj := range page {
		if !obj.IsDir && obj.Key > after {
			out = append(out, sessionstore.ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
		}
	}
	slices.SortFunc(out, func(a, b sessionstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

var _ sessionstore.ObjectListerAfter = (*store)(nil)

// errNoStartAfter stops a listing whose driver cannot start after a key.
var errNoStartAfter = errors.New("the driver cannot list from a key")

// List returns the objects whose key starts with prefix, in key order
// (byte-wise), with the sizes and modification times the object store
// lists: every one when limit <= 0, reading every page of the listing
// before it returns, else the first limit of them, with one request (a
// page of limit keys). An object written or removed while it lists may or
// may not be in the result.
func (s *store) List(ctx context.Context, prefix string, limit int) ([]sessionstore.ObjectInfo, error) {
	if limit > 0 {
		page, _, err := s.b.ListPage(ctx, blob.FirstPageToken, limit, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return nil, fmt.Errorf("remote: list %s: %w", prefix, err)
		}
		var out []sessionstore.ObjectInfo
		for _, obj := range page {
			if !obj.IsDir {
				out = append(out, sessionstore.ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
			}
		}
		slices.SortFunc(out, func(a, b sessionstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
		return out, nil
	}
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	var out []sessionstore.ObjectInfo
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("remote: list %s: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		out = append(out, sessionstore.ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
	}
	slices.SortFunc(out, func(a, b sessionstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete removes key's object; an absent object is not an error. A nil
// return means the object store removed it: a later Get or Stat does not
// find it, a later Create of key can succeed.
func (s *store) Delete(ctx context.Context, key string) error {
	if err := s.b.Delete(ctx, key); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil
		}
		return fmt.Errorf("remote: delete %s: %w", key, err)
	}
	return nil
}
