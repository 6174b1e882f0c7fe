package sessionstore

import (
	"context"
	"time"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// ObjectStore is the object storage a Store keeps its sessions in when
// Options.Remote is set: S3, GCS, Azure Blob or an S3-compatible server,
// through the binding in the module github.com/sessionstore/sessionstore/remote
// (gocloud.dev/blob), PostgreSQL through the module
// github.com/sessionstore/sessionstore/pgstore, or any other implementation
// of these six calls (sessiontest.ObjectStoreConformance checks one). Keys
// are slash-separated paths; the Store writes under sessions/ and meta/
// (and keys/, for encrypted sessions).
//
// The one guarantee the Store builds on is Create: of any number of
// concurrent Creates of one key, across processes and machines, exactly one
// succeeds, and the others return an error matching ErrObjectExists. That
// is what fences a writer that lost its session (see remote.go). Every
// call returns only after the object store answered: a Create or Put that
// returns nil is durable there.
type ObjectStore interface {
	// Create stores data under key if no object has that key (S3's
	// If-None-Match: *), else returns an error matching ErrObjectExists.
	Create(ctx context.Context, key string, data []byte) error
	// Put stores data under key, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns length bytes of key's object from offset (all of it
	// from offset when length is negative), or an error matching
	// ErrObjectNotFound.
	Get(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Stat returns the attributes of key's object, or an error matching
	// ErrObjectNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns the objects whose keys start with prefix, in key
	// order (byte-wise): every one when limit <= 0, else the first limit
	// of them (one page of the object store's listing, so that finding a
	// session's newest log objects costs one request however long its log
	// is).
	List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error)
	// Delete removes key's object; an absent object is not an error.
	Delete(ctx context.Context, key string) error
}

// ObjectListerAfter is an ObjectStore that can list from a key on, with
// one request: S3's StartAfter, GCS's StartOffset. ListPage uses it to
// read a page of sessions with a few listing requests, however many
// sessions the store holds (list_remote.go; without it, a page lists
// every metadata copy: a request per thousand sessions).
type ObjectListerAfter interface {
	// ListAfter returns the first limit (> 0) objects whose keys start
	// with prefix and sort after after (byte-wise), in key order, with
	// one request; or an error matching errors.ErrUnsupported when the
	// object store cannot, and the Store then lists from the prefix on.
	ListAfter(ctx context.Context, prefix, after string, limit int) ([]ObjectInfo, error)
}

// ObjectVersionDeleter is an ObjectStore on a bucket that keeps older
// versions of objects (S3 versioning, GCS object versioning) and can
// remove every version of one. A Store that deletes an encrypted session
// for good removes its key record's object with it when the ObjectStore
// implements it, so that no older version of the key record stays to open
// the session's data, whose older versions may stay. On a versioned
// bucket whose ObjectStore does not, the key record's older versions stay
// until the bucket's own lifecycle rules expire them: give the keys/
// prefix a rule that expires noncurrent versions. The module
// github.com/sessionstore/sessionstore/remote's NewS3 implements it.
type ObjectVersionDeleter interface {
	// DeleteAllVersions removes every version of key's object, and its
	// delete markers; an absent object is not an error.
	DeleteAllVersions(ctx context.Context, key string) error
}

// ObjectReplacer is an ObjectStore that can replace an object only if it
// is still the one it read: S3's If-Match on PutObject (GCS's
// ifGenerationMatch). Rewrap with Options.Remote needs it (otherwise it
// returns ErrRemoteUnsupported): a key record's object replaced
// unconditionally could bring back one that a Delete destroyed
// meanwhile (the session's deletion would no longer be final), or
// replace the key of a session made again under the same id. The module
// github.com/sessionstore/sessionstore/remote's NewS3 implements it.
type ObjectReplacer interface {
	// GetTagged returns key's whole object and a tag of this version of
	// it (S3's ETag), or an error matching ErrObjectNotFound.
	GetTagged(ctx context.Context, key string) (data []byte, tag string, err error)
	// ReplaceIf stores data under key if key's object is still the one
	// tag names, else returns an error matching ErrObjectChanged (also
	// when no object is there any more).
	ReplaceIf(ctx context.Context, key string, data []byte, tag string) error
}

// IsBulkKey reports whether key names a sealed chunk or a blob of a
// session: an object written once, possibly large (a sealed chunk, or a
// blob of any size), and read by ranges. Every other object the Store
// writes is small (log objects, metadata copies, markers, renewals, the
// clock probe, fork registrations), and a log object is written on every
// commit group. A binding that keeps the small objects in a database and
// the bulk ones in an object store routes by it (the module
// github.com/sessionstore/sessionstore/pgstore does).
func IsBulkKey(key string) bool { return seam.IsBulkKey(key) }

// BulkKeysUnder reports whether some key for which IsBulkKey holds can
// start with prefix: a listing of prefix in a binding that routes by
// IsBulkKey must then list both stores.
func BulkKeysUnder(prefix string) bool { return seam.BulkKeysUnder(prefix) }

// ObjectInfo describes a stored object. ModTime is the object store's own
// clock, which lease expiry reads (never the local clock).
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Errors of an ObjectStore, and of sessions kept in one.
var (
	// ErrObjectExists is returned by ObjectStore.Create when the key holds
	// an object.
	ErrObjectExists = seam.ErrObjectExists
	// ErrObjectNotFound is returned by ObjectStore.Get and Stat for a key
	// that holds no object.
	ErrObjectNotFound = seam.ErrObjectNotFound
	// ErrObjectChanged is returned by ObjectReplacer.ReplaceIf when the
	// object was replaced or removed since it was read.
	ErrObjectChanged = seam.ErrObjectChanged
	// ErrRemote reports a call to the object store that failed (it could
	// not be reached, answered with an error, or did not answer before
	// Options.RemoteTimeout). An Append that returns it acknowledged
	// nothing; the session's next open keeps or cuts the events that
	// append wrote by what the object store holds (remote.go), or, with
	// DurableLocal, keeps them when the local chunk holds them whole
	// (the next open here stores them): their state is unknown, as a
	// failed write's.
	ErrRemote = seam.ErrRemote
	// ErrFenced is returned by every write to a session that another
	// worker took over: this Store lost it, acknowledges nothing more
	// and opens it again only by reconciling with the object store.
	ErrFenced = seam.ErrFenced
)
