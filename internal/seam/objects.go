package seam

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Objects is the object store a session kept remotely goes through: the
// calls of the root package's public ObjectStore, with ObjectInfo as
// this package's. The one guarantee the log builds on is Create: of any
// number of concurrent Creates of one key, across processes and machines,
// exactly one succeeds, and the others return an error matching
// ErrObjectExists. Every call returns only after the object store
// answered: a Create or Put that returns nil is durable there.
type Objects interface {
	Create(ctx context.Context, key string, data []byte) error
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string, offset, length int64) ([]byte, error)
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error)
	Delete(ctx context.Context, key string) error
}

// ObjectInfo describes a stored object. ModTime is the object store's
// own clock, which lease expiry reads (never the local clock).
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// The errors of an object store and of the sessions kept in one. The
// root package's public errors of the same names are these values, so
// that an ObjectStore's errors and the seam's match them.
var (
	ErrObjectExists   = errors.New("sessionstore: object exists")
	ErrObjectNotFound = errors.New("sessionstore: object not found")
	ErrObjectChanged  = errors.New("sessionstore: object changed since it was read")
	ErrRemote         = errors.New("sessionstore: object store call failed")
	ErrFenced         = errors.New("sessionstore: session taken over by another writer")
)

// RemoteErr wraps the failed object store call op on key: the error
// matches ErrRemote and err.
func RemoteErr(op, key string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrRemote, op, key, err)
}
